"""Every table the pipeline writes reads back identically with delta-rs (no Spark involved)."""

from __future__ import annotations

from collections import Counter

import pytest
from deltalake import DeltaTable
from lake_checks import plain_value

from medallion.config import Config
from medallion.deployment import tables_of
from medallion.tables import read_table

pytestmark = pytest.mark.slow  # left out of make test-fast (docs/testing.md)


def test_delta_rs_reads_every_table_with_the_same_rows(spark, reference_lake):
    # Every pipeline's input, so every declared table is written; customer updates and
    # deletes too.
    config = Config(landing=str(reference_lake / "landing"), lake=str(reference_lake / "lake"))
    for table in tables_of(config):
        spark_df = read_table(spark, table)
        columns = spark_df.columns
        from_spark = Counter(tuple(plain_value(v) for v in row) for row in spark_df.collect())
        arrow = DeltaTable(table.path).to_pyarrow_table(columns=columns)
        from_rs = Counter(
            tuple(plain_value(record[c]) for c in columns) for record in arrow.to_pylist()
        )
        assert sum(from_rs.values()) == sum(from_spark.values()), table.key
        assert from_rs == from_spark, table.key
        assert sum(from_spark.values()) > 0 or table.key.endswith("quarantine"), table.key
