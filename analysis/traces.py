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

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F


def traced(ev: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(acks: one row per acknowledged message id, consumed: trace_consumed rows)."""
    acks = (
        ev.where(F.col("event") == "trace_send_acked")
        .groupBy("msg_id")
        .agg(
            F.min("ts_ms").alias("ts_ms"),
            F.min_by("topic", "ts_ms").alias("topic"),
            F.min_by("broker", "ts_ms").alias("broker"),
            F.min_by("queue_id", "ts_ms").alias("queue_id"),
            F.min_by("queue_offset", "ts_ms").alias("queue_offset"),
            F.min_by("latency_ms", "ts_ms").alias("latency_ms"),
        )
    )
    consumed = ev.where(F.col("event") == "trace_consumed").select(
        "msg_id", "group", "topic", "broker", "queue_id", "queue_offset", "ts_ms"
    )
    return acks, consumed


def lost_messages(acks: DataFrame, consumed: DataFrame) -> DataFrame:
    seen = consumed.select("msg_id").distinct()
    return acks.join(seen, "msg_id", "left_anti").select(
        "msg_id", "topic", "broker", "queue_id", "queue_offset", F.col("ts_ms").alias("acked_ms")
    )


def duplicates(consumed: DataFrame) -> DataFrame:
    return (
        consumed.groupBy("group", "msg_id")
        .agg(F.count(F.lit(1)).alias("count"))
        .where(F.col("count") > 1)
    )


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


def windows(acks: DataFrame, consumed: DataFrame, gap_ms: int) -> DataFrame:
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
    acked_at = acks.select("msg_id", F.col("ts_ms").alias("acked_ms"))
    pulls = (
        consumed.where(F.col("broker").isNotNull())
        .groupBy("msg_id", "broker", "topic")
        .agg(F.min("ts_ms").alias("ts_ms"))
        .join(acked_at, "msg_id", "left")
    )
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
