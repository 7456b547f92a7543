"""Throughput of an available-now run: events per second end to end, and per layer.

    .venv/bin/python benchmarks/throughput.py --events 50000 --files 20

Generates input into a temp folder, runs bronze -> silver -> gold once on local delta-spark
and prints one JSON line with the timings. It also runs an incremental second delivery (10%
more events) to show the cost of a rerun that processes only what is new.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time

from medallion.config import Config
from medallion.generate import generate
from medallion.session import get_spark
from medallion.streams.runner import run_available_now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--customers", type=int, default=2_000)
    parser.add_argument("--files", type=int, default=20)
    args = parser.parse_args()

    os.environ.setdefault("MEDALLION_SPARK_MASTER", "local[2]")
    root = tempfile.mkdtemp(prefix="medallion-bench-")
    landing, lake = f"{root}/landing", f"{root}/lake"
    generate(landing, events=args.events, customers=args.customers, files=args.files, seed=1)
    started = time.monotonic()
    spark = get_spark(app_name="medallion-bench")
    session_seconds = time.monotonic() - started
    config = Config(landing=landing, lake=lake)

    started = time.monotonic()
    report = run_available_now(spark, config)
    first_seconds = time.monotonic() - started
    bronze_rows = report.table("bronze/events").rows_out

    generate(landing, events=args.events // 10, customers=0, files=2, seed=2)
    started = time.monotonic()
    second = run_available_now(spark, config)
    second_seconds = time.monotonic() - started

    print(
        json.dumps(
            {
                "events_generated": args.events,
                "bronze_event_rows": bronze_rows,
                "customer_changes": report.table("bronze/customers").rows_out,
                "session_start_s": round(session_seconds, 1),
                "first_run_s": round(first_seconds, 1),
                "first_run_events_per_s": round(bronze_rows / first_seconds),
                "second_run_new_rows": second.table("bronze/events").rows_out,
                "second_run_s": round(second_seconds, 1),
                "driver_python_max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                // 1024,
                "cores": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
