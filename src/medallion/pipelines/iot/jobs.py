"""IoT's jobs (medallion/pipeline_jobs.py): the defaults, with their descriptions."""

from medallion.pipeline_jobs import PipelineJobs

JOBS = PipelineJobs(
    description=(
        "Device readings -> deduplicated readings, device status and minute metrics, available-now."
    ),
    stream_description="The IoT flows streaming side by side (processing-time triggers).",
)
