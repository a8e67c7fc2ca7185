"""The incident job (SPEC T4): a cluster's JSON logs in, incident tables and a summary out.

Runs with a local SparkSession (`rocketrio analyze`) or unchanged under
``spark-submit --master spark://host:7077 .../incidents.py LOGDIR... --out DIR``. Everything
over raw lines is a DataFrame operation (built-in functions, no Python UDFs, no collect of raw
events); only the small final tables are collected to build ``summary.json``.

Definitions (the README's "Incident analysis" section says the same for operators), each in
the module that computes it:

- **Ingest** (ingest.py): every ``*.jsonl`` under the given paths, read with the schema the
  event catalogue gives; malformed, unknown-event and bad-field lines are counted (with
  examples) and left out, none is fatal.
- **Failover** of a broker set (failovers.py, incident_rows.py): an ``elect_master`` whose
  master differs from the previous master of that set, joined by epoch (not time) to the new
  master's role change and first write and the old master's return; *master lost* is the
  first loss signal about the old master, at most `failovers.LOOKBACK_MS` before the election.
- **Unavailability window**, **acknowledged but lost**, **duplicate** (traces.py): from the
  client traces, when tracing was on.
- Raft leaders, SyncStateSet changes and truncations (incident_rows.py), computed like the
  failovers from the collected incident events in plain Python.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rocketrio.analysis import incident_rows as rows
from rocketrio.analysis.args import add_args, parse_time  # noqa: F401 (re-exported)
from rocketrio.analysis.failovers import COLUMNS, write_gap
from rocketrio.analysis.ingest import CORRUPT, SOURCE, Ingested, ingest, log_files
from rocketrio.analysis.small_tables import SMALL, small_frame
from rocketrio.analysis.traces import traced, windows

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


# ---------------------------------------------------------------------------- the job


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


#: how the summary orders each table's rows
ORDER = {
    "failovers": ("elected_ms", "broker"),
    "windows": ("start_ms", "op", "broker", "topic"),
    "raft_leaders": ("at_ms", "term"),
    "sync_state_set_changes": ("at_ms", "broker"),
    "truncations": ("at_ms", "node"),
    "lost": ("acked_ms", "msg_id"),
    "duplicates": ("group", "msg_id"),
}
#: input bytes per shuffle partition (at least one partition per core)
PARTITION_BYTES = 64 << 20


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
    under ``out_dir``; returns the summary (the module docstring defines every table).

    The plan, in Spark jobs: one parse of the lines (counted as they are cached), the
    incident events collected (their tables computed here, `analysis.incident_rows`), the
    traces grouped by message id (cached), one job that computes the traces' tables
    (cached) and the failovers' write gaps and collects them with the counts the summary
    needs, then one write per table."""
    started = time.time()
    files, empty = log_files(inputs)
    with job_conf(spark) as conf:
        big = conf.partitions(files)
        progress(f"reading {len(files)} log files")
        read = ingest(spark, files, since_ms, until_ms)
        progress(f"finding incidents in {len(read.incidents)} incident events")
        ev = read.incidents
        nodes = rows.node_brokers(ev)
        fo = rows.failovers(ev, rows.with_sets(ev, nodes))
        tr = traced(read.ev, big)
        tables: dict[str, DataFrame] = {
            "windows": windows(tr.acks, tr.pulls, gap_ms, big),
            "lost": tr.lost,
            "duplicates": tr.duplicates,
        }
        tables = {name: df.cache() for name, df in tables.items()}
        parts = dict(tables)
        if fo:
            parts["write_gap"] = write_gap(cuts_frame(spark, fo), tr.acks)
        got = collect_all(parts, tr.rows)
        got.update(small_rows(ev, nodes, fo, got))
        for name, keys in ORDER.items():
            got[name].sort(key=lambda row, keys=keys: [_asc_nulls_first(row[k]) for k in keys])
        summary = summarize(inputs, read, empty, got)
        for name in SMALL:
            tables[name] = small_frame(spark, name, got[name])
        tables["skipped"] = read.bad.select(
            F.col(SOURCE).alias("file"), "ts", "event", "why", F.col(CORRUPT).alias("line")
        )
        write_tables(tables, out_dir, progress)
        for df in (read.lines, tr.rows, *tables.values()):
            df.unpersist()
    summary["took_s"] = round(time.time() - started, 3)
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    from rocketrio.analysis.report import render_html

    with open(os.path.join(out_dir, "report.html"), "w", encoding="utf-8") as f:
        f.write(render_html(summary))
    return summary


@attrs.frozen
class JobConf:
    """Partition counts: the incident tables are a few thousand rows (one partition per core
    and no more); the traces are the bulk of the lines (sized to the input)."""

    cores: int

    def partitions(self, files: list[str]) -> int:
        """For the traces' shuffles: one partition per `PARTITION_BYTES` of ``files``."""
        local = [
            f.removeprefix("file://") for f in files if "://" not in f or f.startswith("file://")
        ]
        size = sum(os.path.getsize(f) for f in local)
        remote = len(files) - len(local)  # a URI's size is unknown here: count one partition each
        return max(self.cores, size // PARTITION_BYTES + remote)


@contextlib.contextmanager
def job_conf(spark: SparkSession) -> Iterator[JobConf]:
    """The job's own settings, the session's back afterwards: small shuffles (one partition
    per core: the traces' shuffles say their own count) and no adaptive execution (which
    plans each shuffle of a query as a Spark job of its own: dozens of jobs over a few
    thousand incident events)."""
    cores = spark.sparkContext.defaultParallelism
    want = {"spark.sql.shuffle.partitions": str(cores), "spark.sql.adaptive.enabled": "false"}
    before = {k: spark.conf.get(k, None) for k in want}
    for k, v in want.items():
        spark.conf.set(k, v)
    try:
        yield JobConf(cores)
    finally:
        for k, old in before.items():
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)


def collect_all(tables: dict[str, DataFrame], traces: DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows and the traces' counts (``traces``: `Traced.rows`), in ONE Spark
    job: each table and count a JSON line of one union, parsed here."""
    counts = {
        "traces": traces.agg(
            F.count(F.when(F.col("ack") & (F.col("rn") == 1), F.lit(1))).alias("acked"),
            F.count(F.when(~F.col("ack"), F.lit(1))).alias("consumed"),
        ),
    }
    parts = [
        df.select(F.lit(name).alias("t"), F.to_json(F.struct(*df.columns)).alias("j"))
        for name, df in (*tables.items(), *counts.items())
    ]
    union = parts[0]
    for p in parts[1:]:
        union = union.unionAll(p)
    columns = {name: df.columns for name, df in (*tables.items(), *counts.items())}
    got: dict[str, list[dict[str, Any]]] = {name: [] for name in columns}
    for r in union.collect():
        row = json.loads(r["j"])  # to_json leaves out null fields: every column back
        got[r["t"]].append({c: row.get(c) for c in columns[r["t"]]})
    return got


def _sql_value(v: str | int | None, sql_type: str) -> str:
    if v is None:
        return f"CAST(NULL AS {sql_type})"
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"CAST({int(v)} AS {sql_type})"


def cuts_frame(spark: SparkSession, fo: list[dict[str, Any]]) -> DataFrame:
    """The failovers' cuts (fid, broker, lost_ms, elected_ms) as an inline table of one SQL
    statement: planned on the driver (``createDataFrame`` of Python rows runs a Python worker
    in a Spark job each time the frame is broadcast)."""
    cols = (
        ("fid", "STRING"),
        ("broker", "STRING"),
        ("lost_ms", "BIGINT"),
        ("elected_ms", "BIGINT"),
    )
    rows = ", ".join("(" + ", ".join(_sql_value(f[c], t) for c, t in cols) + ")" for f in fo)
    names = ", ".join(c for c, _ in cols)
    return spark.sql(f"SELECT * FROM VALUES {rows} AS cuts({names})")


def small_rows(
    ev: list[dict[str, Any]],
    nodes: dict[str, tuple[Any, Any]],
    fo: list[dict[str, Any]],
    got: dict[str, list[dict[str, Any]]],
) -> dict[str, list[dict[str, Any]]]:
    """The incident tables from the collected events (``fo``: `incident_rows.failovers`),
    the failovers completed with the write gaps and lost messages Spark found (``got``)."""
    gaps = {g["fid"]: g["write_gap_ms"] for g in got.get("write_gap", [])}
    lost = rows.acked_lost(fo, got["lost"])
    failovers = [
        {**{c: f.get(c) for c in COLUMNS}, "write_gap_ms": gaps.get(f["fid"]),
         "acked_lost": lost.get(f["fid"], 0)}
        for f in fo
    ]  # fmt: skip
    terms, role_changes = rows.raft_churn(ev)
    return {
        "failovers": failovers,
        "raft_leaders": rows.raft_leaders(ev),
        "sync_state_set_changes": rows.sync_state_set_changes(ev),
        "truncations": rows.truncations(ev, nodes),
        "terms": [{"n": terms}],
        "role_changes": [{"n": role_changes}],
    }


def _asc_nulls_first(v: Any) -> tuple[bool, Any]:
    return (v is not None, v)


def write_tables(tables: dict[str, DataFrame], out_dir: str, progress: Progress) -> None:
    """Each table as Parquet under ``out_dir`` (the small ones from their caches)."""
    os.makedirs(out_dir, exist_ok=True)
    for name, df in tables.items():
        progress(f"writing {name}")
        df.write.mode("overwrite").parquet(os.path.join(out_dir, name))


def summarize(
    inputs: list[str], read: Ingested, empty: int, got: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """``summary.json`` (``took_s`` is set by the caller): line counts, then each table."""
    counts = read.counts
    fos = got["failovers"]
    for f in fos:
        f["headline"] = headline(f)
    [traces] = got["traces"]
    acked, consumed = traces["acked"], traces["consumed"]
    return {
        "inputs": list(inputs),
        "generated_at_ms": int(time.time() * 1000),
        "took_s": 0.0,
        "lines": {
            "files": read.files,
            "read": sum(counts.values()),
            "parsed": counts.get("ok", 0),
            "skipped": {
                "malformed": counts.get("malformed", 0),
                "unknown_event": counts.get("unknown_event", 0),
                "bad_field": counts.get("bad_field", 0),
                "empty_files": empty,
            },
            "skipped_examples": read.examples,
        },
        "failovers": fos,
        "windows": got["windows"],
        "raft_leaders": got["raft_leaders"],
        "raft_churn": {
            "elections": len(got["raft_leaders"]),
            "terms": got["terms"][0]["n"],
            "role_changes": got["role_changes"][0]["n"],
        },
        "sync_state_set_changes": got["sync_state_set_changes"],
        "truncations": got["truncations"],
        "acked": acked,
        "consumed": consumed,
        "traced": acked > 0 or consumed > 0,
        "lost": got["lost"],
        "duplicates": got["duplicates"],
    }


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
