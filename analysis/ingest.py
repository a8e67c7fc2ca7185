"""Ingest (SPEC T4): a cluster's JSON log lines into the incident job, every bad line counted.

Every ``*.jsonl`` under the given paths (recursively) is read with the schema that
`analysis.schema` generates from the event catalogue. A line that is not JSON is *malformed*; a
line whose event the catalogue does not know is *unknown_event*; a line of a known event with a
field of the wrong type, or without a field its record requires, is *bad_field*. All are
counted (with up to `EXAMPLES` examples) and left out; none is fatal. `ingest` keeps of the good
lines only the `INTERESTING` events and their `EV_COLUMNS`, materialised narrow.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

import attrs
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rocketrio.actors.observe import events
from rocketrio.analysis.schema import CORRUPT, log_schema, required_fields

EXAMPLES = 20
SOURCE = "_source_file"  # not "file": some events have a field of that name

#: the events the incident tables read
INTERESTING = (
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
#: the client traces among them: the bulk of the lines, read by traces.py only
TRACES = ("trace_send_acked", "trace_consumed")
#: the columns of theirs the tables read
EV_COLUMNS = (
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


def log_files(inputs: Iterable[str]) -> tuple[list[str], int]:
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


def _struct(names: Iterable[str]) -> T.StructType:
    """The catalogue's columns ``names`` (in its order) plus the corrupt-record column."""
    keep = set(names) | {CORRUPT}
    return T.StructType([f for f in log_schema().fields if f.name in keep])


def _narrow_names() -> set[str]:
    """What every line is parsed into: the tables' columns and every field of the events
    they read (so a wrong type in one of those is a bad field)."""
    names = {*EV_COLUMNS, "ts", "event"} - {"ts_ms"}
    for event in INTERESTING:
        names |= set(events.record_fields(event))
    return names


_JSON = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
WIDE = "_wide"  # the parse of a line whose event's required fields the narrow parse lacks


def read_lines(spark: SparkSession, files: list[str]) -> DataFrame:
    """Every non-blank line of ``files`` parsed into the narrow columns (`_narrow_names`),
    with ``value`` (the line's text) and `SOURCE` (its file).

    The lines are read as text and parsed with ``from_json``: the parser fills only the
    columns the job reads (about 50, not the catalogue's 250), and the text stays at hand for
    the few lines whose event requires a field outside them (`classify` parses those again,
    wide)."""
    narrow = _struct(_narrow_names())
    if not files:
        return spark.createDataFrame([], narrow).select(
            "*", F.lit(None).cast("string").alias("value"), F.lit(None).cast("string").alias(SOURCE)
        )
    text = spark.read.text(files).where(F.trim(F.col("value")) != "")  # the JSON reader skips them
    return text.select(
        F.input_file_name().alias(SOURCE), "value", F.from_json("value", narrow, _JSON).alias("j")
    ).select(*(F.col(f"j.{f.name}").alias(f.name) for f in narrow.fields), "value", SOURCE)


def _sql_str(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


_MASK_BITS = 62  # bits of one null mask (a signed 64-bit long, kept positive)


def _missing_required(required: dict[str, list[str]], prefix: str = "") -> str | None:
    """A SQL condition: the line's event (one of ``required``'s) requires a field the line
    lacks (``prefix``: where the fields are, e.g. ``s.`` for a struct). Linear in the
    fields, not in events x fields: each required field has a bit; per group of `_MASK_BITS`
    fields, the line's mask of null fields is ANDed with its event's mask of required fields
    (a map literal). One expression string (not a Column built call by call: ~200 events
    make that thousands of JVM calls), and small enough for Spark's generated code (a CASE
    over every event is not: Spark interprets it row by row)."""
    required = {name: fields for name, fields in sorted(required.items()) if fields}
    names = sorted({f for fields in required.values() for f in fields})
    if not names:
        return None
    bit = {f: i for i, f in enumerate(names)}
    arms = []
    for lo in range(0, len(names), _MASK_BITS):
        chunk = names[lo : lo + _MASK_BITS]
        nulls = " | ".join(f"IF({prefix}`{f}` IS NULL, {1 << (bit[f] - lo)}L, 0L)" for f in chunk)
        entries = []
        for event, fields in required.items():
            mask = sum(1 << (bit[f] - lo) for f in fields if lo <= bit[f] < lo + len(chunk))
            if mask:
                entries.append(f"{_sql_str(event)}, {mask}L")
        if entries:
            arms.append(
                f"(({nulls}) & coalesce(try_element_at(map({', '.join(entries)}), event), 0L)) != 0"
            )
    return " OR ".join(arms) if arms else None


def _wide_bad(wide: dict[str, list[str]]) -> Column:
    """For a line of one of the ``wide`` events (event -> required fields, some outside the
    narrow parse): the line parsed again into every required field, and true when one has
    the wrong type or is missing (null or absent). Only those lines pay this parse: the
    struct is bound once to a lambda variable (a column referenced per field would be
    parsed per field)."""
    schema = _struct({f for fields in wide.values() for f in fields}).simpleString()
    missing = _missing_required(wide, "s.") or "false"
    opts = ", ".join(f"{_sql_str(k)}, {_sql_str(v)}" for k, v in _JSON.items())
    return F.expr(
        f"element_at(transform(array(from_json(value, {_sql_str(schema)}, map({opts}))), "
        f"s -> s.`{CORRUPT}` IS NOT NULL OR {missing}), 1)"
    )


def classify(lines: DataFrame) -> DataFrame:
    """Add ``ts_ms`` (epoch ms) and ``why`` (None: a good line).

    A line is checked over what the narrow parse filled when its event's required fields are
    all among those columns (the events the tables read, and any other event whose fields
    they cover); a line of another known event is parsed again into the required fields of
    such events, so a missing, null or wrongly typed required field is a bad field either
    way. A wrong type in a field outside both parses (one its event does not require and the
    tables do not read) is not looked at."""
    known = list(events.CATALOGUE)
    narrow = _narrow_names()
    req = required_fields()
    near = {e: fs for e, fs in req.items() if set(fs) <= narrow}
    wide = {e: fs for e, fs in req.items() if not set(fs) <= narrow}
    ts_ms = F.unix_millis(F.to_timestamp(F.col("ts")))
    why = (
        F.when(F.col(CORRUPT).isNotNull() & F.col("event").isNull(), "malformed")
        .when(F.col("event").isNull() | ts_ms.isNull(), "malformed")
        .when(~F.col("event").isin(known), "unknown_event")
        .when(F.col(CORRUPT).isNotNull(), "bad_field")
    )
    missing = _missing_required(near)
    if missing is not None:
        why = why.when(F.expr(missing), "bad_field")
    if wide:
        why = why.when(F.col("event").isin(list(wide)) & _wide_bad(wide), "bad_field")
    return lines.withColumn("ts_ms", ts_ms).withColumn("why", why)


def held_lines(path: str) -> bool:
    """Whether the local file ``path`` holds a line `read_lines` keeps: a byte other than a
    space or a line break (Spark's text reader splits at \\n, \\r and \\r\\n; ``trim``
    takes spaces only). Reads until the first such byte: the first one of a log file."""
    with open(path, "rb") as f:
        while chunk := f.read(4096):
            if chunk.strip(b" \r\n"):
                return True
    return False


@attrs.frozen
class Ingested:
    """What `ingest` read: the classified lines, the bad ones, the interesting events."""

    lines: DataFrame  # every line, narrow and checkpointed (unpersist when done)
    bad: DataFrame  # the skipped lines
    ev: DataFrame  # the good lines of `INTERESTING` events in the time range (of `lines`)
    incidents: list[dict[str, Any]]  # those of `ev` that are no client traces: few, collected
    counts: dict[str, int]  # why ("ok" for a good line) -> lines
    files: int  # files that held lines
    examples: list[dict[str, Any]]  # up to `EXAMPLES` skipped lines


def ingest(
    spark: SparkSession, files: list[str], since_ms: int | None, until_ms: int | None
) -> Ingested:
    """Read and classify ``files``; keep the interesting events between the times given.

    The JSON is parsed once: the narrow classified lines are checkpointed (materialised by
    the first action, with the lineage cut, so later plans do not re-analyse the wide read and
    its classification) and every later pass reads that; one aggregation gives the counts
    (and, when a file is remote, the files that held lines; local files are looked at here).
    ``ts``, the corrupt text and the file name are kept for the bad lines (the skipped table);
    a good line keeps the fields the tables read."""
    why = F.col("why")
    local = [f.removeprefix("file://") for f in files if "://" not in f or f.startswith("file://")]
    # the file of every line only when some file is remote; else only of the bad lines
    # (the skipped table): grouping a million lines by their file's name costs as much as
    # classifying them, and the files that held lines are found here (`held_lines`)
    all_local = len(local) == len(files)
    lines = (
        classify(read_lines(spark, files))
        .select(
            F.when(why.isNotNull(), F.col(SOURCE)).alias(SOURCE) if all_local else SOURCE,
            F.when(why.isNotNull(), F.col(CORRUPT)).alias(CORRUPT),
            F.when(why.isNotNull(), F.col("ts")).alias("ts"),
            "why",
            *EV_COLUMNS,
        )
        .localCheckpoint(eager=False)
    )
    per_file = lines.groupBy("why", SOURCE).agg(F.count(F.lit(1)).alias("n")).collect()
    counts: dict[str, int] = {}
    for r in per_file:
        counts[r["why"] or "ok"] = counts.get(r["why"] or "ok", 0) + r["n"]
    if all_local:
        n_files = sum(1 for f in local if held_lines(f))
    else:
        n_files = len({r[SOURCE] for r in per_file}) if files else 0
    bad = lines.where(why.isNotNull())
    examples = [
        {
            "file": os.path.basename(r[SOURCE] or ""),
            "line": (r[CORRUPT] or json.dumps({"event": r["event"], "ts": r["ts"]}))[:200],
            "why": r["why"],
        }
        for r in (
            bad.select(SOURCE, CORRUPT, "event", "ts", "why").limit(EXAMPLES).collect()
            if set(counts) - {"ok"}
            else ()  # no bad line: no pass for the examples
        )
    ]
    good = lines.where(why.isNull())
    if since_ms is not None:
        good = good.where(F.col("ts_ms") >= since_ms)
    if until_ms is not None:
        good = good.where(F.col("ts_ms") <= until_ms)
    ev = good.where(F.col("event").isin(*INTERESTING)).select(*EV_COLUMNS)
    # collected: thousands of rows, whose tables are computed in plain Python
    # (`analysis.incident_rows`), not as dozens of small Spark shuffles
    incidents = [
        r.asDict(recursive=True) for r in ev.where(~F.col("event").isin(*TRACES)).collect()
    ]
    return Ingested(lines, bad, ev, incidents, counts, n_files, examples)
