"""Retail's jobs (medallion/pipeline_jobs.py): the first pipeline's names, medallion_pipeline
and medallion_stream; the pipeline, the trigger and the events' and customers' topics among
the job parameters (``databricks bundle run medallion_pipeline --params ...``); and
medallion_pipeline_serverless, the triggered layers on serverless compute, run when files land
in the landing volume (var.file_arrival_pause_status), the alternative to the cron schedule.
Never run two of them at once: they share checkpoints (medallion refuses the second run)."""

from medallion.pipeline_jobs import PipelineJobs

JOBS = PipelineJobs(
    triggered="medallion_pipeline",
    streaming="medallion_stream",
    description="Landing files -> bronze -> silver -> gold, available-now, exactly once.",
    stream_description=(
        "Bronze, silver and gold streaming side by side (processing-time triggers)."
    ),
    job_parameters=("events", "customers"),
    task_descriptions={
        # bronze_events carries each batch of events on through silver and gold too
        # (streams/fusion.py), so the events' silver and gold tables are written there.
        "bronze": (
            "Every landed line, exactly once; the events on through silver and gold in the "
            "same micro-batches."
        ),
        "silver": (
            "Customer changes applied in sequence (deletes included); invalid ones "
            "quarantined with a reason."
        ),
        "gold": "Daily revenue by country and the customers' change feed.",
    },
    serverless="medallion_pipeline_serverless",
    serverless_description="The triggered pipeline (bronze -> silver -> gold) on serverless compute.",
)
