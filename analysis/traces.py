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
from pyspark.sql import DataFrame, Window
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


def traced(ev: DataFrame) -> Traced:
    """The traces of ``ev``, as `Traced` says."""
    acked = F.col("event") == "trace_send_acked"
    at = F.when(acked, F.col("ts_ms"))
    fields = ("topic", "broker", "queue_id", "queue_offset", "latency_ms")
    by_msg = (
        ev.where(F.col("event").isin("trace_send_acked", "trace_consumed"))
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


def _waits(rows: DataFrame, keys: list[str], waiting_since: str, gap_ms: int) -> DataFrame:
    """Per ``keys``, in time order: the wait that ended at a row, from the later of the
    previous row and the row's own ``waiting_since``, when it is longer than ``gap_ms``."""
    w = Window.partitionBy(*keys).orderBy("ts_ms")
    return (
        rows.withColumn("prev_ms", F.lag("ts_ms").over(w))
        .withColumn("start_ms", F.greatest("prev_ms", waiting_since))
        .where(F.col("prev_ms").isNotNull() & (F.col("ts_ms") - F.col("start_ms") > gap_ms))
        .select(*keys, "start_ms", F.col("ts_ms").alias("end_ms"))
        .withColumn("length_ms", F.col("end_ms") - F.col("start_ms"))
    )


def windows(acks: DataFrame, pulls: DataFrame, gap_ms: int) -> DataFrame:
    """A send window ends at an acknowledgement whose message had been waiting (since its send
    call: ``latency_ms``) while no other message of the set, or of the set's topic, was
    acknowledged; a pull window ends at a consumption whose message had been acknowledged
    (and so was waiting) while nothing of the set or topic was consumed. Idle time, when
    nothing was being sent or was waiting, is no window. Both are one pass over the rows in
    time order (window functions), whatever the traffic."""
    sends = acks.where(F.col("broker").isNotNull()).withColumn(
        "sent_ms", F.col("ts_ms") - F.col("latency_ms")
    )
    send_set = _waits(sends, ["broker"], "sent_ms", gap_ms)
    send_topic = _waits(sends, ["broker", "topic"], "sent_ms", gap_ms)
    pull_set = _waits(pulls, ["broker"], "acked_ms", gap_ms)
    pull_topic = _waits(pulls, ["broker", "topic"], "acked_ms", gap_ms)
    cols = ["op", "broker", "topic", "start_ms", "end_ms", "length_ms"]
    no_topic = F.lit(None).cast("string").alias("topic")
    parts = [
        send_set.select(F.lit("send").alias("op"), "broker", no_topic, *cols[3:]),
        send_topic.select(F.lit("send").alias("op"), *cols[1:]),
        pull_set.select(F.lit("pull").alias("op"), "broker", no_topic, *cols[3:]),
        pull_topic.select(F.lit("pull").alias("op"), *cols[1:]),
    ]
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out
