"""Files per table after many small micro-batches, with and without medallion's compaction
of small files (medallion/compaction.py).

Each micro-batch is what the events stream does with one small landed file, called directly
rather than through N real triggers (which cost minutes more on a laptop): the real
``foreachBatch`` function of ``bronze_events`` (pipelines/retail/events.py) on the file's lines, which
appends to bronze, the quarantine and silver, MERGEs into gold and appends the users it
counted.

``--mode on`` runs the compaction check after every batch, as a streaming run does every
``compaction_check_seconds``; ``--mode off`` never compacts. Local sessions turn Delta's own
auto compaction and optimized writes off (session.py), in both modes. Files are counted in the latest snapshot (``DESCRIBE
DETAIL numFiles``) and on disk (what VACUUM would later delete). Results: docs/operations.md.

    .venv/bin/python benchmarks/small_files.py --mode on --batches 200 --out build/bench-on.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("MEDALLION_SPARK_MASTER", "local[2]")

TABLES = (
    "bronze/events",
    "silver/events",
    "silver/events_quarantine",
    "gold/hourly_product_metrics",
)


def _counts(spark, config) -> dict[str, dict[str, int]]:
    from medallion.ops.maintain import files_on_disk

    out = {}
    for key in TABLES:
        table = config.table(key)
        detail = spark.sql(f"DESCRIBE DETAIL {table.sql_name}").collect()[0]
        out[key] = {"files": int(detail.numFiles), "on_disk": files_on_disk(table)}
    return out


def run(mode: str, batches: int, events_per_batch: int, lake: Path) -> dict:
    from medallion.compaction import compact_fragmented
    from medallion.config import Config
    from medallion.ops.maintain import maintain
    from medallion.pipelines.retail.events import events_batch
    from medallion.pipelines.retail.generator import generate_event_lines
    from medallion.session import get_spark
    from medallion.tables import ensure_tables

    spark = get_spark(app_name="medallion-small-files")
    config = Config(landing=str(lake / "landing"), lake=str(lake / "lake"))
    ensure_tables(spark, config)
    checkpoint = config.checkpoint("bronze_events")
    os.makedirs(checkpoint, exist_ok=True)
    Path(checkpoint, "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}))
    # The events' foreachBatch function: bronze, quarantine, silver and gold of each batch.
    process = events_batch(config, checkpoint)

    samples: dict[int, dict] = {}
    started = time.monotonic()
    for batch in range(batches):
        now = datetime.now(timezone.utc)
        lines = [
            (line, f"file:/landing/events/{batch}.json", now)
            for line in generate_event_lines(events_per_batch, seed=1000 + batch)
            if line.strip()
        ]
        raw = spark.createDataFrame(
            lines, "value STRING, _source_file STRING, _ingested_at TIMESTAMP"
        )
        process(raw, batch)
        if mode == "on":
            compact_fragmented(spark, [config.table(key) for key in TABLES])
        if batch + 1 in (1, 50, 100, 150, batches):
            samples[batch + 1] = _counts(spark, config)
            files = {k: v["files"] for k, v in samples[batch + 1].items()}
            elapsed = time.monotonic() - started
            print(f"{mode}: {batch + 1} batches, {elapsed:.0f}s, files {files}", flush=True)
    seconds = time.monotonic() - started
    maintain(spark, config, list(TABLES), vacuum_retention_hours=None)
    return {
        "mode": mode,
        "batches": batches,
        "events_per_batch": events_per_batch,
        "seconds": round(seconds, 1),
        "samples": samples,
        "after_optimize": _counts(spark, config),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=("on", "off"), required=True)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--events-per-batch", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="medallion-small-files-") as folder:
        result = run(args.mode, args.batches, args.events_per_batch, Path(folder))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    from peers.common import finish

    finish(result)  # the line benchmarks/bench.py reads


if __name__ == "__main__":
    main()
