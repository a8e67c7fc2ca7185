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
    """The traces, read in one pass grouped by message id (one shuffle for all of them).

    acks: one row per acknowledged message id; lost: those no consumer logged; consumed:
    the ``trace_consumed`` rows; pulls: per (message id, broker set, topic) its first
    consumption and its acknowledgement (what the pull windows read); duplicates: the
    message ids a group consumed more than once. ``by_msg`` is cached (unpersist when
    done); the others are plans over it."""

    by_msg: DataFrame
    acks: DataFrame
    lost: DataFrame
    consumed: DataFrame
    pulls: DataFrame
    duplicates: DataFrame


def traced(ev: DataFrame, partitions: int) -> Traced:
    """The traces of ``ev``, as `Traced` says, in ``partitions`` partitions by message id."""
    acked = F.col("event") == "trace_send_acked"
    at = F.when(acked, F.col("ts_ms"))
    fields = ("topic", "broker", "queue_id", "queue_offset", "latency_ms")
    by_msg = (
        ev.where(F.col("event").isin("trace_send_acked", "trace_consumed"))
        .repartition(partitions, "msg_id")
        .groupBy("msg_id")
        .agg(
            F.min(at).alias("ts_ms"),  # min_by skips the rows its ordering is null for
            *(F.min_by(f, at).alias(f) for f in fields),
            F.collect_list(
                F.when(
                    F.col("event") == "trace_consumed",
                    F.struct("group", "topic", "broker", "queue_id", "queue_offset", "ts_ms"),
                )
            ).alias("consumed"),
        )
        .cache()
    )
    acks = by_msg.where(F.col("ts_ms").isNotNull()).select("msg_id", "ts_ms", *fields)
    lost = by_msg.where(F.col("ts_ms").isNotNull() & (F.size("consumed") == 0)).select(
        "msg_id", "topic", "broker", "queue_id", "queue_offset", F.col("ts_ms").alias("acked_ms")
    )
    consumed = by_msg.select(
        "msg_id", F.col("ts_ms").alias("acked_ms"), F.explode("consumed").alias("c")
    ).select(
        "msg_id",
        "c.group",
        "c.topic",
        "c.broker",
        "c.queue_id",
        "c.queue_offset",
        "c.ts_ms",
        "acked_ms",
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
    return Traced(by_msg, acks, lost, consumed.drop("acked_ms"), pulls, duplicates)


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
