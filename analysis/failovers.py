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

Every function is DataFrame operations over the interesting events (`ingest.EV_COLUMNS`); a
failover's parts are joined to it by its id ``fid`` (broker set # epoch).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

LOOKBACK_MS = 30_000  # how long before an election a loss signal still belongs to it
SKEW_MS = 1_000  # how far host clocks may disagree

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


def node_brokers(ev: DataFrame) -> DataFrame:
    """node -> (broker set, broker id): from the role changes each broker process logs."""
    return (
        ev.where((F.col("event") == "broker_role_changed") & F.col("broker").isNotNull())
        .groupBy("node")
        .agg(
            F.max_by("broker", "ts_ms").alias("node_broker"),
            F.max_by("broker_id", "ts_ms").alias("node_broker_id"),
        )
    )


def elections(ev: DataFrame) -> DataFrame:
    """One row per election of a broker set (replicated lines merged), ordered, with the
    previous master and when that one was elected."""
    el = (
        ev.where(F.col("event") == "elect_master")
        .groupBy("broker", "epoch", "master_id")
        .agg(
            F.min("ts_ms").alias("elected_ms"),
            F.max("term").alias("term"),
            # the leader knows why and from whom it elected; followers log reason "unknown"
            F.max_by("reason", F.col("reason") != "unknown").alias("reason"),
            F.max_by("candidates", F.col("candidates").isNotNull()).alias("candidates"),
        )
    )
    w = Window.partitionBy("broker").orderBy(
        F.col("epoch").asc_nulls_first(), F.col("term").asc_nulls_first(), "elected_ms"
    )
    return el.withColumn("old_master_id", F.lag("master_id").over(w)).withColumn(
        "prev_elected_ms", F.lag("elected_ms").over(w)
    )


def failovers(ev: DataFrame, nodes: DataFrame, acks: DataFrame, lost: DataFrame) -> DataFrame:
    """The failovers table (`COLUMNS`): elections that changed the master, with their parts."""
    el = elections(ev)
    fo = el.where(
        F.col("old_master_id").isNotNull()
        & (F.col("master_id").isNull() | (F.col("master_id") != F.col("old_master_id")))
    ).withColumnRenamed("master_id", "new_master_id")
    # small, and joined six times below: computed once
    fo = fo.withColumn("fid", F.concat_ws("#", "broker", F.col("epoch").cast("string"))).cache()

    evn = ev.join(F.broadcast(nodes), "node", "left").withColumn(
        "set", F.coalesce("broker", "node_broker")
    )
    roles = evn.where(F.col("event") == "broker_role_changed").select(
        F.col("set").alias("r_set"),
        F.col("broker_id").alias("r_id"),
        F.col("broker_role").alias("r_role"),
        F.col("epoch").alias("r_epoch"),
        F.col("ts_ms").alias("r_ms"),
        F.col("node").alias("r_node"),
    )
    # every part is one row per failover: broadcast to the join (Spark cannot know they are
    # small before they run, and would shuffle and sort both sides of every join)
    out = (
        fo.join(F.broadcast(master_lost(fo, evn)), "fid", "left")
        .join(F.broadcast(new_master_writable(fo, roles)), "fid", "left")
        .join(F.broadcast(old_master_back(fo, roles)), "fid", "left")
        .join(F.broadcast(first_write(fo, evn)), "fid", "left")
    )
    out = out.join(F.broadcast(old_master_truncation(out, evn)), "fid", "left")
    return (
        out.join(F.broadcast(write_gap(out, acks)), "fid", "left")
        .join(F.broadcast(acked_lost(out, lost)), "fid", "left")
        .withColumn("acked_lost", F.coalesce("acked_lost", F.lit(0)))
        .select(*COLUMNS)
    )


def master_lost(fo: DataFrame, evn: DataFrame) -> DataFrame:
    """fid -> the first loss signal about the old master (``lost_ms``, ``lost_signal``)."""
    # loss signals: the old master's id at the controller / NameServer, or a slave of the set
    signals = evn.where(
        F.col("event").isin("broker_heartbeat_timeout", "broker_expired")
        | ((F.col("event") == "ha_connection_closed") & (F.col("side") == "slave"))
    ).select(
        F.col("set").alias("s_set"),
        F.col("event").alias("s_event"),
        F.col("broker_id").alias("s_id"),
        F.col("node_broker_id").alias("s_node_id"),
        F.col("ts_ms").alias("s_ms"),
    )
    lower = F.greatest(
        F.coalesce(F.col("prev_elected_ms"), F.lit(0)), F.col("elected_ms") - LOOKBACK_MS
    )
    return (
        fo.join(
            signals,
            (signals.s_set == fo.broker)
            & (signals.s_ms > lower)
            & (signals.s_ms <= F.col("elected_ms") + SKEW_MS)
            & (
                (F.col("s_event").isin("broker_heartbeat_timeout", "broker_expired"))
                & (F.col("s_id") == F.col("old_master_id"))
                | (F.col("s_event") == "ha_connection_closed")
                & (F.col("s_node_id").isNull() | (F.col("s_node_id") != F.col("old_master_id")))
            ),
        )
        .groupBy("fid")
        .agg(F.min("s_ms").alias("lost_ms"), F.min_by("s_event", "s_ms").alias("lost_signal"))
    )


def new_master_writable(fo: DataFrame, roles: DataFrame) -> DataFrame:
    """fid -> when the new master took SYNC_MASTER at the election's epoch (``writable_ms``)."""
    return (
        fo.join(
            roles,
            (roles.r_set == fo.broker)
            & (roles.r_id == fo.new_master_id)
            & (roles.r_role == "SYNC_MASTER")
            & (roles.r_epoch == fo.epoch),
        )
        .groupBy("fid")
        .agg(F.min("r_ms").alias("writable_ms"))
    )


def old_master_back(fo: DataFrame, roles: DataFrame) -> DataFrame:
    """fid -> when the old master came back as a slave (``old_back_ms``) and its node."""
    return (
        fo.join(
            roles,
            (roles.r_set == fo.broker)
            & (roles.r_id == fo.old_master_id)
            & (roles.r_role == "SLAVE")
            & (roles.r_epoch >= fo.epoch),
        )
        .groupBy("fid")
        .agg(F.min("r_ms").alias("old_back_ms"), F.min_by("r_node", "r_ms").alias("old_node"))
    )


def first_write(fo: DataFrame, evn: DataFrame) -> DataFrame:
    """fid -> the new master's first acknowledged write in its epoch (``first_write_ms``)."""
    first = evn.where(F.col("event") == "master_first_write").select(
        F.col("set").alias("w_set"), F.col("epoch").alias("w_epoch"), F.col("ts_ms").alias("w_ms")
    )
    return (
        fo.join(first, (first.w_set == fo.broker) & (first.w_epoch == fo.epoch))
        .groupBy("fid")
        .agg(F.min("w_ms").alias("first_write_ms"))
    )


def old_master_truncation(out: DataFrame, evn: DataFrame) -> DataFrame:
    """fid -> what the old master cut from its CommitLog when it came back
    (``old_truncated_bytes``)."""
    cuts = evn.where(F.col("event").isin("ha_truncated", "ha_log_reset")).select(
        F.col("node").alias("t_node"),
        F.col("ts_ms").alias("t_ms"),
        (F.col("from_offset") - F.col("to_offset")).alias("t_bytes"),
    )
    return (
        out.join(cuts, (cuts.t_node == out.old_node) & (cuts.t_ms >= out.old_back_ms))
        .groupBy("fid")
        .agg(F.min_by("t_bytes", "t_ms").alias("old_truncated_bytes"))
    )


GAP_BUCKET_MS = 60_000  # write_gap: acknowledgements summarised per broker set and minute


def write_gap(out: DataFrame, acks: DataFrame) -> DataFrame:
    """fid -> the write gap, from the producers' traces of this broker set: the last
    acknowledgement before the loss (or the election) to the first one after it.

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


def acked_lost(out: DataFrame, lost: DataFrame) -> DataFrame:
    """fid -> acknowledged-but-lost messages of the set, acknowledged between the previous
    election and the new master's first write (``acked_lost``)."""
    lo = lost.select(F.col("broker").alias("l_set"), F.col("acked_ms").alias("l_ms"))
    return (
        F.broadcast(out)
        .join(
            lo,
            (lo.l_set == out.broker)
            & (lo.l_ms >= F.coalesce("prev_elected_ms", F.lit(0)))
            & (lo.l_ms <= F.coalesce("first_write_ms", "writable_ms", "elected_ms")),
        )
        .groupBy("fid")
        .agg(F.count(F.lit(1)).alias("acked_lost"))
    )
