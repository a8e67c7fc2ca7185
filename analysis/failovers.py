"""Failovers (SPEC T4): one row per change of master of a broker set, with its timeline.

A **failover** of a broker set is an ``elect_master`` whose master differs from the previous
master of that set (lines of several controller replicas are one election). Elections of a set
are ordered by (epoch, term, time): host clocks may disagree by a second, epochs and terms do
not. The new master's role change (``writable_ms``), its first write and the old master's return
as a slave (and what it cut from its CommitLog then) are joined to the election by epoch, not
by time. *Master lost* is the first loss signal about the old master: the controller's
``broker_heartbeat_timeout`` or the NameServer's ``broker_expired`` for its id, or a slave of
the set seeing its replication connection close, after the old master was elected, at most
`LOOKBACK_MS` before the election and at most `SKEW_MS` after it. With client tracing on, the
producers' acknowledgements around the loss give the write gap, and the acknowledged-but-lost
messages of the set before the new master wrote are counted.

The failovers and their parts are computed from the collected incident events in plain
Python (`analysis.incident_rows`: thousands of rows, not dozens of small Spark shuffles); only
the write gap, which reads every acknowledgement, is a DataFrame operation (`write_gap`) over
the failovers' cuts. A failover's parts are joined to it by its id ``fid`` (broker set # epoch).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from rocketrio.analysis.incident_rows import LOOKBACK_MS, SKEW_MS

__all__ = ["COLUMNS", "GAP_BUCKET_MS", "LOOKBACK_MS", "SKEW_MS", "write_gap"]

COLUMNS = (
    "broker",
    "epoch",
    "term",
    "old_master_id",
    "new_master_id",
    "reason",
    "candidates",
    "lost_ms",
    "lost_signal",
    "elected_ms",
    "writable_ms",
    "first_write_ms",
    "old_back_ms",
    "old_truncated_bytes",
    "write_gap_ms",
    "acked_lost",
)


GAP_BUCKET_MS = 60_000  # write_gap: acknowledgements summarised per broker set and minute


def write_gap(out: DataFrame, acks: DataFrame) -> DataFrame:
    """fid -> the write gap (``out``: fid, broker, lost_ms, elected_ms per failover), from the
    producers' traces of this broker set: the last acknowledgement before the loss (or the
    election) to the first one after it.

    Not a join of every acknowledgement with every failover of its set: the acknowledgements
    are summarised per set and minute (first, last), the failovers look at the summaries of
    the other minutes and at the single acknowledgements of their own minute only."""
    cuts = out.select(
        "fid",
        F.col("broker").alias("g_set"),
        F.coalesce("lost_ms", "elected_ms").alias("cut"),
    ).withColumn("g_bucket", F.floor(F.col("cut") / GAP_BUCKET_MS))
    a = acks.select(
        F.col("broker").alias("g_set"),
        F.col("ts_ms").alias("a_ms"),
        F.floor(F.col("ts_ms") / GAP_BUCKET_MS).alias("a_bucket"),
    )
    buckets = a.groupBy("g_set", "a_bucket").agg(
        F.min("a_ms").alias("lo"), F.max("a_ms").alias("hi")
    )
    other = (
        F.broadcast(cuts)
        .join(buckets, "g_set")
        .groupBy("fid")
        .agg(
            F.max(F.when(F.col("a_bucket") < F.col("g_bucket"), F.col("hi"))).alias("o_last"),
            F.min(F.when(F.col("a_bucket") > F.col("g_bucket"), F.col("lo"))).alias("o_next"),
        )
    )
    own = (
        F.broadcast(cuts)
        .join(a, (a.g_set == cuts.g_set) & (a.a_bucket == cuts.g_bucket))
        .groupBy("fid")
        .agg(
            F.max(F.when(F.col("a_ms") <= F.col("cut"), F.col("a_ms"))).alias("m_last"),
            F.min(F.when(F.col("a_ms") > F.col("cut"), F.col("a_ms"))).alias("m_next"),
        )
    )
    return other.join(F.broadcast(own), "fid", "left").select(
        "fid",
        (F.least("m_next", "o_next") - F.greatest("m_last", "o_last")).alias("write_gap_ms"),
    )
