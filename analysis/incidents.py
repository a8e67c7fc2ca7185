"""The incident job (SPEC T4): a cluster's JSON logs in, incident tables and a summary out.

Runs with a local SparkSession (`rocketrio analyze`) or unchanged under
``spark-submit --master spark://host:7077 .../incidents.py LOGDIR... --out DIR``. Everything
over raw lines is a DataFrame operation (built-in functions, no Python UDFs, no collect of raw
events); only the small final tables are collected to build ``summary.json``.

Definitions (the README's "Incident analysis" section says the same for operators):

- **Ingest.** Every ``*.jsonl`` under the given paths (recursively), read with the schema that
  `analysis.schema` generates from the event catalogue. A line that is not JSON is *malformed*;
  a line whose event the catalogue does not know is *unknown_event*; a line of a known event
  with a field of the wrong type, or without a field its record requires, is *bad_field*. All
  are counted (with up to 20 examples) and left out; none is fatal.
- **Failover** of a broker set: an ``elect_master`` whose master differs from the previous
  master of that set (lines of several controller replicas are one election). Elections of a
  set are ordered by (epoch, term, time): host clocks may disagree by a second, epochs and
  terms do not. The new master's role change, its first write and the old master's return as a
  slave are joined to the election by epoch, not by time. *Master lost* is the first loss
  signal about the old master: the controller's ``broker_heartbeat_timeout`` or the NameServer's
  ``broker_expired`` for its id, or a slave of the set seeing its replication connection close,
  after the old master was elected, at most `LOOKBACK_MS` before the election and at most
  `SKEW_MS` after it.
- **Unavailability window**: with client tracing on, a time longer than ``gap_ms`` during
  which a message of a broker set (or of a set's topic) was waiting and no other message of
  it got through. A send window ends at an acknowledgement and starts at the later of the
  previous acknowledgement and that message's send call (``latency_ms`` of its trace line); a
  pull window ends at a consumption and starts at the later of the previous consumption and
  that message's acknowledgement. Idle time, with nothing sent or waiting, is no window.
- **Acknowledged but lost**: a traced ``trace_send_acked`` whose message id no traced consumer
  ever logged; a **duplicate** is a message id one group consumed more than once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from rocketrio.actors.observe import events
from rocketrio.analysis.schema import CORRUPT, log_schema, required_fields

LOOKBACK_MS = 30_000  # how long before an election a loss signal still belongs to it
SKEW_MS = 1_000  # how far host clocks may disagree
EXAMPLES = 20
SOURCE = "_source_file"  # not "file": some events have a field of that name
TABLES = (
    "failovers",
    "windows",
    "raft_leaders",
    "sync_state_set_changes",
    "truncations",
    "lost",
    "duplicates",
    "skipped",
)

Progress = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


# ---------------------------------------------------------------------------- ingest


def _log_files(inputs: Iterable[str]) -> tuple[list[str], int]:
    """Local inputs: the ``*.jsonl`` files under them and how many are empty. A URI (hdfs://,
    s3a://, ...) is passed to Spark as it is."""
    files: list[str] = []
    empty = 0
    for path in inputs:
        if "://" in path and not path.startswith("file://"):
            files.append(path)
            continue
        local = path.removeprefix("file://")
        found = (
            [
                os.path.join(d, f)
                for d, _, names in os.walk(local)
                for f in names
                if f.endswith(".jsonl")
            ]
            if os.path.isdir(local)
            else [local]
        )
        for f in sorted(found):
            if os.path.getsize(f) == 0:
                empty += 1
            else:
                files.append(f)
    return files, empty


def read_lines(spark: SparkSession, files: list[str]) -> DataFrame:
    """Every line of ``files`` as the catalogue's columns plus `SOURCE` (its file)."""
    if not files:
        return spark.createDataFrame([], log_schema()).select(
            "*", F.lit(None).cast("string").alias(SOURCE)
        )
    raw = (
        spark.read.schema(log_schema())
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json(files)
        .withColumn(SOURCE, F.input_file_name())
    )
    return raw


def _sql_str(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _missing_required() -> str | None:
    """A SQL condition: the line's event requires a field the line lacks. One expression
    string (not a Column built call by call: ~150 events make that thousands of JVM calls)."""
    arms = [
        f"WHEN {_sql_str(name)} THEN " + " OR ".join(f"`{f}` IS NULL" for f in fields)
        for name, fields in sorted(required_fields().items())
        if fields
    ]
    return f"CASE event {' '.join(arms)} ELSE false END" if arms else None


def classify(lines: DataFrame) -> DataFrame:
    """Add ``ts_ms`` (epoch ms) and ``why`` (None: a good line)."""
    known = list(events.CATALOGUE)
    ts_ms = F.unix_millis(F.to_timestamp(F.col("ts")))
    why = (
        F.when(F.col(CORRUPT).isNotNull() & F.col("event").isNull(), "malformed")
        .when(F.col("event").isNull() | ts_ms.isNull(), "malformed")
        .when(~F.col("event").isin(known), "unknown_event")
        .when(F.col(CORRUPT).isNotNull(), "bad_field")
    )
    missing = _missing_required()
    if missing is not None:
        why = why.when(F.expr(missing), "bad_field")
    return lines.withColumn("ts_ms", ts_ms).withColumn("why", why)


# ---------------------------------------------------------------------------- incidents

_INTERESTING = (
    "elect_master",
    "broker_role_changed",
    "master_first_write",
    "broker_heartbeat_timeout",
    "broker_expired",
    "ha_connection_closed",
    "ha_truncated",
    "ha_log_reset",
    "commitlog_truncated",
    "raft_leader_elected",
    "raft_role_changed",
    "sync_state_set_changed",
    "trace_send_acked",
    "trace_consumed",
)


_EV_COLUMNS = (
    "event",
    "ts_ms",
    "node",
    "role",
    "broker",
    "broker_id",
    "broker_role",
    "epoch",
    "term",
    "master_id",
    "reason",
    "candidates",
    "leader",
    "side",
    "from_offset",
    "to_offset",
    "matched_epoch",
    "offset",
    "dropped_bytes",
    "sync_state_set",
    "msg_id",
    "topic",
    "group",
    "queue_id",
    "queue_offset",
    "latency_ms",
    "raft_role",
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
    sig = (
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
    roles = evn.where(F.col("event") == "broker_role_changed").select(
        F.col("set").alias("r_set"),
        F.col("broker_id").alias("r_id"),
        F.col("broker_role").alias("r_role"),
        F.col("epoch").alias("r_epoch"),
        F.col("ts_ms").alias("r_ms"),
        F.col("node").alias("r_node"),
    )
    writable = (
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
    back = (
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
    first = evn.where(F.col("event") == "master_first_write").select(
        F.col("set").alias("w_set"), F.col("epoch").alias("w_epoch"), F.col("ts_ms").alias("w_ms")
    )
    first_write = (
        fo.join(first, (first.w_set == fo.broker) & (first.w_epoch == fo.epoch))
        .groupBy("fid")
        .agg(F.min("w_ms").alias("first_write_ms"))
    )
    cuts = evn.where(F.col("event").isin("ha_truncated", "ha_log_reset")).select(
        F.col("node").alias("t_node"),
        F.col("ts_ms").alias("t_ms"),
        (F.col("from_offset") - F.col("to_offset")).alias("t_bytes"),
    )
    out = (
        fo.join(sig, "fid", "left")
        .join(writable, "fid", "left")
        .join(back, "fid", "left")
        .join(first_write, "fid", "left")
    )
    trunc = (
        out.join(cuts, (cuts.t_node == out.old_node) & (cuts.t_ms >= out.old_back_ms))
        .groupBy("fid")
        .agg(F.min_by("t_bytes", "t_ms").alias("old_truncated_bytes"))
    )
    out = out.join(trunc, "fid", "left")
    # the write gap, from the producers' traces of this broker set
    cut = F.coalesce("lost_ms", "elected_ms")
    a = acks.select(F.col("broker").alias("a_set"), F.col("ts_ms").alias("a_ms"))
    gap = (
        out.join(a, a.a_set == out.broker)
        .groupBy("fid")
        .agg(
            F.max(F.when(F.col("a_ms") <= cut, F.col("a_ms"))).alias("last_ack_ms"),
            F.min(F.when(F.col("a_ms") > cut, F.col("a_ms"))).alias("next_ack_ms"),
        )
        .select("fid", (F.col("next_ack_ms") - F.col("last_ack_ms")).alias("write_gap_ms"))
    )
    lo = lost.select(F.col("broker").alias("l_set"), F.col("acked_ms").alias("l_ms"))
    lost_n = (
        out.join(
            lo,
            (lo.l_set == out.broker)
            & (lo.l_ms >= F.coalesce("prev_elected_ms", F.lit(0)))
            & (lo.l_ms <= F.coalesce("first_write_ms", "writable_ms", "elected_ms")),
        )
        .groupBy("fid")
        .agg(F.count(F.lit(1)).alias("acked_lost"))
    )
    return (
        out.join(gap, "fid", "left")
        .join(lost_n, "fid", "left")
        .withColumn("acked_lost", F.coalesce("acked_lost", F.lit(0)))
        .select(
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
    )


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


def raft_leaders(ev: DataFrame) -> DataFrame:
    return (
        ev.where(F.col("event") == "raft_leader_elected")
        .groupBy("term")
        .agg(F.min_by("leader", "ts_ms").alias("leader"), F.min("ts_ms").alias("at_ms"))
    )


def sync_state_set_changes(ev: DataFrame) -> DataFrame:
    ch = (
        ev.where(F.col("event") == "sync_state_set_changed")
        .withColumn("members", F.array_sort("sync_state_set"))
        .groupBy("broker", "epoch", "members")
        .agg(F.min("ts_ms").alias("at_ms"))
    )
    w = Window.partitionBy("broker").orderBy(F.col("epoch").asc_nulls_first(), "at_ms")
    prev = F.lag(F.size("members")).over(w)
    return ch.withColumn(
        "change",
        F.when(prev.isNull(), "initial")
        .when(F.size("members") < prev, "shrink")
        .when(F.size("members") > prev, "expand")
        .otherwise("same"),
    )


def truncations(ev: DataFrame, nodes: DataFrame) -> DataFrame:
    t = (
        ev.where(
            ((F.col("event") == "ha_truncated") & (F.col("from_offset") > F.col("to_offset")))
            | F.col("event").isin("ha_log_reset", "commitlog_truncated")
        )
        .join(F.broadcast(nodes), "node", "left")
        .select(
            "node",
            F.coalesce("broker", "node_broker").alias("broker"),
            F.col("node_broker_id").alias("broker_id"),
            F.when(F.col("event") == "ha_truncated", F.col("matched_epoch")).alias("epoch"),
            F.when(F.col("event") == "commitlog_truncated", F.lit(None))
            .otherwise(F.col("from_offset"))
            .alias("from_offset"),
            F.coalesce(
                F.when(F.col("event") == "commitlog_truncated", F.col("offset")), "to_offset"
            ).alias("to_offset"),
            F.when(F.col("event") == "commitlog_truncated", F.col("dropped_bytes"))
            .otherwise(F.col("from_offset") - F.col("to_offset"))
            .alias("bytes"),
            F.col("event").alias("kind"),
            F.col("ts_ms").alias("at_ms"),
        )
    )
    return t


# ---------------------------------------------------------------------------- the job


def _rows(df: DataFrame, order: list[str]) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.orderBy(*order).collect()]


def _hms(ms: int | None) -> str:
    if ms is None:
        return "?"
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


def headline(f: dict[str, Any]) -> str:
    """One line per failover, e.g. ``broker-a: master 0 lost at 12:00:03.120, new master 2
    writable at 12:00:03.780, 660 ms, 0 acked lost``."""
    start = f["lost_ms"] if f["lost_ms"] is not None else f["elected_ms"]
    end = f["writable_ms"] if f["writable_ms"] is not None else f["first_write_ms"]
    took = f"{end - start} ms" if end is not None else "not writable in these logs"
    new = f["new_master_id"] if f["new_master_id"] is not None else "none"
    seen = "lost" if f["lost_ms"] is not None else "replaced"
    return (
        f"{f['broker']}: master {f['old_master_id']} {seen} at {_hms(start)}, new master {new} "
        f"writable at {_hms(end)}, {took}, {f['acked_lost']} acked lost"
    )


def run(
    spark: SparkSession,
    inputs: list[str],
    out_dir: str,
    *,
    since_ms: int | None = None,
    until_ms: int | None = None,
    gap_ms: int = 1000,
    progress: Progress = _quiet,
) -> dict[str, Any]:
    """Read ``inputs``, write the Parquet tables and ``summary.json`` (and ``report.html``)
    under ``out_dir``; returns the summary (the module docstring defines every table)."""
    started = time.time()
    files, empty = _log_files(inputs)
    progress(f"reading {len(files)} log files")
    # materialised narrow: the columns the incidents and the skipped table read, with the
    # lineage cut (later plans do not re-analyse the wide read and its classification)
    lines = (
        classify(read_lines(spark, files))
        .select(SOURCE, CORRUPT, "ts", "why", *_EV_COLUMNS)
        .localCheckpoint()
    )
    counts = {
        (r["why"] or "ok"): r["n"]
        for r in lines.groupBy("why").agg(F.count(F.lit(1)).alias("n")).collect()
    }
    n_files = lines.select(SOURCE).distinct().count() if files else 0
    bad = lines.where(F.col("why").isNotNull())
    examples = [
        {
            "file": os.path.basename(r[SOURCE] or ""),
            "line": (r[CORRUPT] or json.dumps({"event": r["event"], "ts": r["ts"]}))[:200],
            "why": r["why"],
        }
        for r in bad.select(SOURCE, CORRUPT, "event", "ts", "why").limit(EXAMPLES).collect()
    ]
    good = lines.where(F.col("why").isNull())
    if since_ms is not None:
        good = good.where(F.col("ts_ms") >= since_ms)
    if until_ms is not None:
        good = good.where(F.col("ts_ms") <= until_ms)
    ev = good.where(F.col("event").isin(*_INTERESTING)).select(*_EV_COLUMNS).localCheckpoint()
    progress("finding incidents")
    nodes = node_brokers(ev).cache()
    acks, consumed = traced(ev)
    acks, consumed = acks.cache(), consumed.cache()
    lost = lost_messages(acks, consumed).cache()
    tables: dict[str, DataFrame] = {
        "failovers": failovers(ev, nodes, acks, lost),
        "windows": windows(acks, consumed, gap_ms),
        "raft_leaders": raft_leaders(ev),
        "sync_state_set_changes": sync_state_set_changes(ev),
        "truncations": truncations(ev, nodes),
        "lost": lost,
        "duplicates": duplicates(consumed),
        "skipped": bad.select(
            F.col(SOURCE).alias("file"), "ts", "event", "why", F.col(CORRUPT).alias("line")
        ),
    }
    os.makedirs(out_dir, exist_ok=True)
    for name, df in tables.items():
        progress(f"writing {name}")
        path = os.path.join(out_dir, name)
        df.write.mode("overwrite").parquet(path)
        if name != "skipped":  # the summary reads the small tables back, not the raw lines
            tables[name] = spark.read.parquet(path)
    fos = _rows(tables["failovers"], ["elected_ms", "broker"])
    for f in fos:
        f["headline"] = headline(f)
    leaders = _rows(tables["raft_leaders"], ["at_ms", "term"])
    summary: dict[str, Any] = {
        "inputs": list(inputs),
        "generated_at_ms": int(time.time() * 1000),
        "took_s": 0.0,
        "lines": {
            "files": n_files,
            "read": sum(counts.values()),
            "parsed": counts.get("ok", 0),
            "skipped": {
                "malformed": counts.get("malformed", 0),
                "unknown_event": counts.get("unknown_event", 0),
                "bad_field": counts.get("bad_field", 0),
                "empty_files": empty,
            },
            "skipped_examples": examples,
        },
        "failovers": fos,
        "windows": _rows(tables["windows"], ["start_ms", "op", "broker", "topic"]),
        "raft_leaders": leaders,
        "raft_churn": {
            "elections": len(leaders),
            "terms": ev.where(F.col("event") == "raft_role_changed")
            .select("term")
            .distinct()
            .count(),
            "role_changes": ev.where(F.col("event") == "raft_role_changed")
            .select("node", "term", "role", "ts_ms")
            .distinct()
            .count(),
        },
        "sync_state_set_changes": _rows(tables["sync_state_set_changes"], ["at_ms", "broker"]),
        "truncations": _rows(tables["truncations"], ["at_ms", "node"]),
        "acked": acks.count(),
        "consumed": consumed.count(),
        "traced": False,
        "lost": _rows(tables["lost"], ["acked_ms", "msg_id"]),
        "duplicates": _rows(tables["duplicates"], ["group", "msg_id"]),
    }
    summary["traced"] = summary["acked"] > 0 or summary["consumed"] > 0
    summary["took_s"] = round(time.time() - started, 3)
    for df in (lines, ev, nodes, acks, consumed, lost):
        df.unpersist()
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    from rocketrio.analysis.report import render_html

    with open(os.path.join(out_dir, "report.html"), "w", encoding="utf-8") as f:
        f.write(render_html(summary))
    return summary


class StageProgress:
    """Prints the running Spark stages' task progress to ``out`` every ``every_s`` seconds."""

    def __init__(self, spark: SparkSession, out: Any = sys.stderr, every_s: float = 1.0) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.out, self.every_s = out, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="spark-progress")

    def _loop(self) -> None:
        last = ""
        while not self._stop.wait(self.every_s):
            parts = []
            for sid in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(sid)
                if info is not None:
                    parts.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks")
            line = ", ".join(parts)
            if line and line != last:
                print(f"  {line}", file=self.out, flush=True)
                last = line

    def __enter__(self) -> StageProgress:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


def session(master: str | None = None, app: str = "rocketrio-incidents") -> SparkSession:
    """A SparkSession for `rocketrio analyze` (``master`` None: ``local[*]``)."""
    b = SparkSession.builder.appName(app).config("spark.sql.session.timeZone", "UTC")
    b = b.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    b = b.master(master or "local[*]")
    if not master or master.startswith("local"):
        # small shuffles: the default of 200 partitions costs seconds of task overhead locally
        b = b.config("spark.sql.shuffle.partitions", str(max(2, 2 * (os.cpu_count() or 1))))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def parse_time(text: str) -> int:
    """``--since``/``--until``: epoch ms, or ISO-8601 (UTC unless it names a zone)."""
    if text.isdigit():
        return int(text)
    from datetime import UTC, datetime

    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return int(t.timestamp() * 1000)


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("logdirs", nargs="+", metavar="LOGDIR", help="log directories or files")
    p.add_argument("--out", default="incidents", help="output directory (default ./incidents)")
    p.add_argument("--since", type=parse_time, help="first time (ISO-8601 or epoch ms)")
    p.add_argument("--until", type=parse_time, help="last time (ISO-8601 or epoch ms)")
    p.add_argument("--gap-ms", type=int, default=1000, help="shortest unavailability window")


def main(argv: list[str] | None = None) -> int:
    """``spark-submit incidents.py LOGDIR... --out DIR``: the master comes from spark-submit."""
    p = argparse.ArgumentParser(prog="incidents.py", description=__doc__.splitlines()[0])
    add_args(p)
    args = p.parse_args(argv)
    spark = SparkSession.builder.appName("rocketrio-incidents").getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    from rocketrio.analysis.report import render_text

    summary = run(
        spark,
        args.logdirs,
        args.out,
        since_ms=args.since,
        until_ms=args.until,
        gap_ms=args.gap_ms,
        progress=lambda m: print(m, file=sys.stderr, flush=True),
    )
    print(render_text(summary))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
