"""The summary's count of files that held lines (SPEC T4): local files are looked at by
`ingest.held_lines` instead of grouping every line by its file; it must count what Spark reads
as lines (a file of spaces and line breaks holds none, a tab is a line)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from rocketrio.analysis import ingest as ing
from tests.harness.incident_logs import Logs


def test_files_that_held_lines_are_the_ones_spark_read_lines_from(
    spark: SparkSession, tmp_path: Path
) -> None:
    lg = Logs()
    lg.add("b-1", "broker", 0, "master_first_write", epoch=2, offset=1)
    logs = Path(lg.write(str(tmp_path / "logs")))
    (logs / "blank.jsonl").write_bytes(b"  \r\n \n\r   \n")  # no line Spark keeps
    (logs / "tab.jsonl").write_bytes(b"\n\t\n")  # one line: a tab, not JSON
    (logs / "late.jsonl").write_bytes(b" " * 10_000 + b"\nnot json\n")  # past the first read
    files, empty = ing.log_files([str(logs)])
    assert empty == 0 and len(files) == 4
    assert [ing.held_lines(f) for f in sorted(files)] == [False, True, True, True]
    read = ing.ingest(spark, [f"file://{f}" for f in files], None, None)
    try:
        assert read.files == 3
        assert read.counts == {"ok": 1, "malformed": 2}
        files_of_bad = {r[ing.SOURCE].rsplit("/", 1)[-1] for r in read.bad.collect()}
        assert files_of_bad == {"tab.jsonl", "late.jsonl"}
    finally:
        read.lines.unpersist()
