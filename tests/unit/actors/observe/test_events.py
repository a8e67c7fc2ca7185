"""The log-event catalogue (actors/observe/events/) is the one declaration of every logged event.

- every logger call outside actors/observe/logs.py goes through `events.emit` with a catalogue
  record
  (an AST scan of the product code: a planted ``log.info("made_up")`` fails it);
- the records are well formed (docstring, level, no field named like the common schema, one
  type per field name);
- strict logging (the test suite's mode, tests/conftest.py) refuses names and fields the
  catalogue lacks; production logging writes them marked ``uncatalogued``.
"""

from __future__ import annotations

import ast
import io
import json
import pathlib
from typing import Any

import attrs
import pytest
import structlog

from rocketrio.actors.observe import events
from rocketrio.actors.observe.logs import UncataloguedEvent, catalogue_problem, configure_logging
from tests.harness.paths import REPO

ROOT = REPO
PRODUCT = ("actors", "cli", "storage", "protocol", "analysis", "deploy")
LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "msg"}


def direct_log_calls(source: str) -> list[int]:
    """Lines of calls like ``<something log>.info(...)`` that bypass `events.emit`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in LEVELS
            and "log" in ast.unparse(node.func.value).lower()
        ):
            out.append(node.lineno)
    return out


def test_product_code_logs_only_through_emit() -> None:
    offenders = []
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == ROOT / "actors" / "logs.py":
                continue
            for line in direct_log_calls(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == []


def test_the_scan_finds_a_planted_direct_call() -> None:
    planted = 'def f(self):\n    self.log.info("made_up_event", x=1)\n    log.warning(name)\n'
    assert direct_log_calls(planted) == [2, 3]
    assert direct_log_calls("events.emit(self.log, events.BrokerBoot(addr='a'))\n") == []


@pytest.mark.parametrize("name", sorted(events.CATALOGUE))
def test_every_record_is_well_formed(name: str) -> None:
    cls = events.CATALOGUE[name]
    assert cls.NAME == name and cls.LEVEL in events.LEVELS
    assert cls.__doc__ and cls.__doc__.strip(), f"{name} needs a docstring"
    assert attrs.has(cls)
    fields = events.record_fields(name)
    assert not set(fields) & set(events.COMMON_FIELDS), "a field named like the common schema"
    assert not set(fields) & {"exc_info", "logger"}


def test_field_types_give_one_type_per_field_name() -> None:
    types = events.field_types()
    assert types["epoch"] is int and types["sync_state_set"] == list[int]
    assert types["ts"] is str and types["msg_id"] is str


def test_two_types_for_one_field_name_are_refused() -> None:
    @events.event("test_clash_only")
    @attrs.frozen(kw_only=True)
    class Clash(events.LogEvent):
        """A record whose ``epoch`` is text (not an int as everywhere else)."""

        epoch: str

    try:
        with pytest.raises(TypeError, match="'epoch'"):
            events.field_types()
    finally:
        del events.CATALOGUE["test_clash_only"]


def test_a_name_cannot_be_declared_twice() -> None:
    with pytest.raises(ValueError, match="twice"):
        events.event("elect_master")(events.ElectMaster)


def test_emit_logs_the_name_at_the_level_with_every_field() -> None:
    with structlog.testing.capture_logs() as logs:
        events.emit(
            structlog.get_logger("t"), events.MasterFirstWrite(epoch=3, offset=120), broker="b"
        )
        events.emit(
            structlog.get_logger("t"),
            events.MasterFirstWrite(epoch=4, offset=7),
            level="warning",
        )
    assert logs[0] == {
        "event": "master_first_write",
        "log_level": "info",
        "epoch": 3,
        "offset": 120,
        "broker": "b",
    }
    assert logs[1]["log_level"] == "warning"


def test_a_missing_required_field_fails_when_the_record_is_built() -> None:
    with pytest.raises(TypeError):
        events.MasterFirstWrite(epoch=3)  # type: ignore[call-arg]


def test_catalogue_problem_names_unknown_events_and_fields() -> None:
    assert catalogue_problem({"event": "master_first_write", "epoch": 1, "offset": 2}) is None
    assert "not in" in (catalogue_problem({"event": "made_up"}) or "")
    assert "nonsense" in (catalogue_problem({"event": "master_first_write", "nonsense": 1}) or "")


def test_strict_logging_raises_on_an_uncatalogued_name() -> None:
    # the suite runs strict (tests/conftest.py): a product call logging a made-up name fails
    with pytest.raises(UncataloguedEvent, match="made_up_event"):
        structlog.get_logger("t").info("made_up_event", x=1)


def test_production_logging_marks_an_uncatalogued_line(tmp_path: Any) -> None:
    saved = structlog.get_config()
    try:
        path = configure_logging("n1", "broker", str(tmp_path), console=io.StringIO())
        structlog.get_logger("t").info("made_up_event", x=1)
        events.emit(structlog.get_logger("t"), events.MasterFirstWrite(epoch=1, offset=2))
    finally:
        structlog.configure(**saved)
    assert path is not None
    lines = [json.loads(x) for x in pathlib.Path(path).read_text().splitlines()]
    assert lines[0]["event"] == "made_up_event" and lines[0]["uncatalogued"] is True
    assert "uncatalogued" not in lines[1] and lines[1]["epoch"] == 1
