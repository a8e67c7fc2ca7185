"""The Spark schemas of the incident tables computed in plain Python (`analysis.incident_rows`),
so their Parquet files have the column names and types the same queries had as DataFrame
operations: a column taken from a log field has that field's catalogue type
(`analysis.schema`), a time or a count is a long."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from rocketrio.analysis.schema import log_schema

__all__ = ["SMALL", "small_frame", "small_schema"]

_LONG = "long"
_STR = "string"

#: table -> its columns, each with the log field it comes from (its type) or `_LONG`/`_STR`
SMALL: dict[str, tuple[tuple[str, str], ...]] = {
    "failovers": (
        ("broker", "broker"),
        ("epoch", "epoch"),
        ("term", "term"),
        ("old_master_id", "master_id"),
        ("new_master_id", "master_id"),
        ("reason", "reason"),
        ("candidates", "candidates"),
        ("lost_ms", _LONG),
        ("lost_signal", _STR),
        ("elected_ms", _LONG),
        ("writable_ms", _LONG),
        ("first_write_ms", _LONG),
        ("old_back_ms", _LONG),
        ("old_truncated_bytes", _LONG),
        ("write_gap_ms", _LONG),
        ("acked_lost", _LONG),
    ),
    "raft_leaders": (("term", "term"), ("leader", "leader"), ("at_ms", _LONG)),
    "sync_state_set_changes": (
        ("broker", "broker"),
        ("epoch", "epoch"),
        ("members", "sync_state_set"),
        ("at_ms", _LONG),
        ("change", _STR),
    ),
    "truncations": (
        ("node", "node"),
        ("broker", "broker"),
        ("broker_id", "broker_id"),
        ("epoch", "matched_epoch"),
        ("from_offset", "from_offset"),
        ("to_offset", "to_offset"),
        ("bytes", _LONG),
        ("kind", _STR),
        ("at_ms", _LONG),
    ),
}


def small_schema(name: str) -> T.StructType:
    """The Spark schema of small table ``name``."""
    logs = {f.name: f.dataType for f in log_schema().fields}
    simple = {_LONG: T.LongType(), _STR: T.StringType()}
    return T.StructType(
        [
            T.StructField(col, simple[src] if src in simple else logs[src], nullable=True)
            for col, src in SMALL[name]
        ]
    )


def small_frame(spark: SparkSession, name: str, rows: list[dict[str, Any]]) -> DataFrame:
    """Small table ``name`` as a DataFrame of ``rows`` (one partition: it is small)."""
    cols = [c for c, _ in SMALL[name]]
    return spark.createDataFrame(
        [tuple(r[c] for c in cols) for r in rows], small_schema(name)
    ).coalesce(1)
