"""What the client traces show (SPEC T4, ``ClientConfig.trace``): acknowledged messages,
consumptions, acknowledged-but-lost messages, duplicates and unavailability windows.

- **Acknowledged but lost**: a traced ``trace_send_acked`` whose message id no traced consumer
  ever logged; a **duplicate** is a message id one group consumed more than once.
- **Unavailability window**: a time longer than ``gap_ms`` during which a message of a broker
  set (or of a set's topic) was waiting and no other message of it got through. A send window
  ends at an acknowledgement and starts at the later of the previous acknowledgement and that
  message's send call (``latency_ms`` of its trace line); a pull window ends at a consumption
  and starts at the later of the previous consumption and that message's acknowledgement. Idle
  time, with nothing sent or waiting, is no window.
"""

from __future__ import annotations

import attrs
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F


@attrs.frozen
class Traced:
    """The traces, read in one pass partitioned by message id (one shuffle for all of them).

    rows: every trace line, flat, with its message's first acknowledgement (``acked_ms``),
    its rank in the message (``rn``: 1 for that acknowledgement) and how many times the
    message was consumed (``n_consumed``); acks: one row per acknowledged message id; lost:
    those no consumer logged; consumed: the ``trace_consumed`` rows; pulls: per (message id,
    broker set, topic) its first consumption and its acknowledgement (what the pull windows
    read); duplicates: the message ids a group consumed more than once. ``rows`` is cached
    (unpersist when done); the others are plans over it, within its partitions."""

    rows: DataFrame
    acks: DataFrame
    lost: DataFrame
    consumed: DataFrame
    pulls: DataFrame
    duplicates: DataFrame


def traced(ev: DataFrame, partitions: int) -> Traced:
    """The traces of ``ev``, as `Traced` says, in ``partitions`` partitions by message id.

    One sort of the trace lines within their message (acknowledgements first, earliest
    first), not an aggregation that gathers each message's consumptions into an array: the
    rows stay flat (a cheap cache), every table below is a filter or a hash aggregation of
    them, and the first acknowledgement is the row ranked 1 (among equal times, as
    ``min_by`` did, one of them)."""
    ack = F.col("event") == "trace_send_acked"
    by_msg = Window.partitionBy("msg_id").orderBy(F.col("ack").desc(), "ts_ms")
    whole = by_msg.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    fields = ("topic", "broker", "queue_id", "queue_offset", "latency_ms")
    rows = (
        ev.where(F.col("event").isin("trace_send_acked", "trace_consumed"))
        .select(ack.alias("ack"), "msg_id", "ts_ms", *fields, "group")
        .repartition(partitions, "msg_id")
        .select(
            "*",
            F.row_number().over(by_msg).alias("rn"),
            F.min(F.when(F.col("ack"), F.col("ts_ms"))).over(whole).alias("acked_ms"),
            F.count(F.when(~F.col("ack"), F.lit(1))).over(whole).alias("n_consumed"),
        )
        .cache()
    )
    first = rows.where(F.col("ack") & (F.col("rn") == 1))
    acks = first.select("msg_id", "ts_ms", *fields)
    lost = first.where(F.col("n_consumed") == 0).select(
        "msg_id", "topic", "broker", "queue_id", "queue_offset", F.col("ts_ms").alias("acked_ms")
    )
    consumed = rows.where(~F.col("ack")).select(
        "msg_id", "group", "topic", "broker", "queue_id", "queue_offset", "ts_ms", "acked_ms"
    )
    pulls = (
        consumed.where(F.col("broker").isNotNull())
        .groupBy("msg_id", "broker", "topic")
        .agg(F.min("ts_ms").alias("ts_ms"), F.first("acked_ms").alias("acked_ms"))
    )
    duplicates = (
        consumed.groupBy("group", "msg_id")
        .agg(F.count(F.lit(1)).alias("count"))
        .where(F.col("count") > 1)
    )
    return Traced(rows, acks, lost, consumed.drop("acked_ms"), pulls, duplicates)


def _wait_rows(prev: Column, keys: list[str], gap_ms: int) -> Column:
    """The window that ended at a row (a struct, or null): from the later of ``prev`` (the
    previous row of its ``keys``) and the row's own ``since``, when longer than ``gap_ms``."""
    start = F.greatest(prev, F.col("since"))
    topic = F.col("topic") if "topic" in keys else F.lit(None).cast("string")
    return F.when(
        prev.isNotNull() & (F.col("ts_ms") - start > gap_ms),
        F.struct(
            F.col("op"),
            F.col("broker"),
            topic.alias("topic"),
            start.alias("start_ms"),
            F.col("ts_ms").alias("end_ms"),
            (F.col("ts_ms") - start).alias("length_ms"),
        ),
    )


def windows(acks: DataFrame, pulls: DataFrame, gap_ms: int, partitions: int) -> DataFrame:
    """A send window ends at an acknowledgement whose message had been waiting (since its send
    call: ``latency_ms``) while no other message of the set, or of the set's topic, was
    acknowledged; a pull window ends at a consumption whose message had been acknowledged
    (and so was waiting) while nothing of the set or topic was consumed. Idle time, when
    nothing was being sent or was waiting, is no window.

    One pass for all four kinds: sends and pulls in one frame, one exchange by broker set
    (which every window below is within), then per row the previous row of its set and of
    its set's topic (two sorts within the partitions, no further exchange)."""
    sends = acks.where(F.col("broker").isNotNull()).select(
        F.lit("send").alias("op"),
        "broker",
        "topic",
        "ts_ms",
        (F.col("ts_ms") - F.col("latency_ms")).alias("since"),
    )
    pull_rows = pulls.select(
        F.lit("pull").alias("op"), "broker", "topic", "ts_ms", F.col("acked_ms").alias("since")
    )
    rows = sends.unionByName(pull_rows).repartition(partitions, "broker")
    by_set = Window.partitionBy("op", "broker").orderBy("ts_ms")
    by_topic = Window.partitionBy("op", "broker", "topic").orderBy("ts_ms")
    found = rows.select(
        F.array(
            _wait_rows(F.lag("ts_ms").over(by_set), ["broker"], gap_ms),
            _wait_rows(F.lag("ts_ms").over(by_topic), ["broker", "topic"], gap_ms),
        ).alias("w")
    )
    return (
        found.select(F.explode("w").alias("w"))
        .where(F.col("w").isNotNull())
        .select("w.op", "w.broker", "w.topic", "w.start_ms", "w.end_ms", "w.length_ms")
    )
