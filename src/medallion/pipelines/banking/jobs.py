"""Banking's jobs (medallion/pipeline_jobs.py): the defaults, and the alert rules' thresholds
given to its flows as settings from bundle variables (declared in variables.yml beside)."""

from medallion.pipeline_jobs import PipelineJobs
from medallion.pipelines.banking.transforms import THRESHOLDS

JOBS = PipelineJobs(
    description=(
        "Transactions and account changes -> screened transactions and fraud alerts, available-now."
    ),
    settings=tuple(threshold.name for threshold in THRESHOLDS),
)
