"""Banking's jobs (medallion/pipeline_jobs.py): the defaults, and the alert rules' thresholds
given to its flows as settings from bundle variables (declared in variables.yml beside)."""

from medallion.pipeline_jobs import PipelineJobs

JOBS = PipelineJobs(
    description=(
        "Transactions and account changes -> screened transactions and fraud alerts, available-now."
    ),
    settings=(
        "fraud_average_multiple",
        "fraud_risk_score_above",
        "fraud_new_account_days",
        "fraud_new_account_amount",
    ),
)
