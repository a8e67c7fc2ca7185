"""The "required field missing" check of ingest (SPEC T4) with the reader pruned: every line is
parsed into the ~50 columns the tables use, and a line of an event whose required fields lie
outside them is parsed again for those fields only. Either way a required field that is absent,
present with a JSON null, or of the wrong type makes the line a bad field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from rocketrio.actors.observe import events
from rocketrio.analysis import ingest as ing
from rocketrio.analysis.schema import CORRUPT, log_schema, required_fields
from tests.harness.incident_logs import Logs

_VALUES: dict[Any, Any] = {str: "x", int: 7}


def _wide_event() -> tuple[str, dict[str, Any], str]:
    """An event whose required fields are simple and one of them, an int, lies outside the
    narrow parse: (event, a complete set of its required fields, that field)."""
    narrow = ing._narrow_names()
    for event, fields in sorted(required_fields().items()):
        types = events.record_fields(event)
        outside = [f for f in fields if f not in narrow and types[f] is int]
        if outside and all(types[f] in _VALUES for f in fields):
            return event, {f: _VALUES[types[f]] for f in fields}, outside[0]
    pytest.fail("no catalogued event requires an int field outside the narrow parse")


def test_the_reader_fills_only_the_narrow_columns(spark: SparkSession, tmp_path: Path) -> None:
    lg = Logs()
    lg.add("b-1", "broker", 0, "master_first_write", epoch=2, offset=1)
    files, _ = ing.log_files([lg.write(str(tmp_path / "logs"))])
    cols = set(ing.read_lines(spark, files).columns)
    assert cols == ing._narrow_names() | {CORRUPT, "value", ing.SOURCE}
    assert len(cols) < len(log_schema().fields) // 3  # ~55 of ~250


def test_missing_null_and_mistyped_required_fields_are_bad_lines(
    spark: SparkSession, tmp_path: Path
) -> None:
    event, complete, field = _wide_event()
    lg = Logs()
    lg.add("b-1", "broker", 0, event, **complete)  # good
    lg.add("b-1", "broker", 1, event, **{k: v for k, v in complete.items() if k != field})
    lg.add("b-1", "broker", 2, event, **{**complete, field: None})  # JSON null: missing
    lg.add("b-1", "broker", 3, event, **{**complete, field: "seven"})  # wrong type
    # an event the tables read (its fields all in the narrow parse)
    lg.add("b-1", "broker", 4, "master_first_write", epoch=2, offset=1)  # good
    lg.add("b-1", "broker", 5, "master_first_write", epoch=2, offset=None)
    lg.add("b-1", "broker", 6, "master_first_write", epoch=2)
    lg.add("b-1", "broker", 7, "master_first_write", epoch=2, offset="one")
    files, _ = ing.log_files([lg.write(str(tmp_path / "logs"))])
    read = ing.ingest(spark, files, None, None)
    try:
        assert read.counts == {"ok": 2, "bad_field": 6}
        bad = sorted((r["event"], r["ts"][-7:]) for r in read.bad.select("event", "ts").collect())
        assert [e for e, _ in bad] == [event] * 3 + ["master_first_write"] * 3
    finally:
        read.lines.unpersist()
