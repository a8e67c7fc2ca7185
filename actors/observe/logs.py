"""Structured logging: JSON lines per process into the log directory, readable console output.

Common schema of every line: ``ts`` (UTC ISO-8601 with ms), ``level``, ``node``, ``role``,
``actor``, ``event``, plus the fields of the happening (``term``, ``epoch``, ``offset`` ...).
Every event and its fields are declared in `rocketrio.actors.observe.events` (the catalogue);
`check_catalogued` enforces it (strict in tests, a marked line in production). Wall-clock time
comes from one injectable function (kernel/clock.py `set_wallclock`, re-exported here):
simulations log deterministic times.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

import structlog

# the wall clock lives in kernel/clock.py; re-exported here for the broker's modules and the
# simulations, which set it through `logs.set_wallclock`
from rocketrio.actors.kernel.clock import set_wallclock as set_wallclock
from rocketrio.actors.kernel.clock import wallclock_ms as wallclock_ms
from rocketrio.actors.kernel.clock import wallclock_source as wallclock_source
from rocketrio.actors.observe import events


def _iso(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    )


class UncataloguedEvent(AssertionError):
    """A strict logger was asked to log a name, or a field, the event catalogue lacks."""


_FIELDS: frozenset[str] | None = None
_SCHEMA = {"ts", "level", "node", "role", "actor", "event", "logger", "exc_info"}


def catalogue_problem(ed: dict[str, Any]) -> str | None:
    """Why a structlog event dict is not a catalogued event (None: it is)."""
    global _FIELDS
    if _FIELDS is None:
        _FIELDS = frozenset(events.field_types())
    name = ed.get("event")
    record = events.CATALOGUE.get(name) if isinstance(name, str) else None
    if record is None:
        return f"event {name!r} is not in rocketrio.actors.observe.events"
    extra = sorted(k for k in ed if k not in _SCHEMA and k not in _FIELDS)
    if extra:
        return f"event {name!r} has fields the catalogue lacks: {extra}"
    for field, tp in _record_types(name):
        base, optional = events.strip_optional(tp)
        v = ed.get(field)
        if v is None:
            if not optional and base is not events.Json:  # JSON null is a Json value
                return f"event {name!r} needs field {field!r} (got None)"
        elif not _json_is(v, base):
            return f"event {name!r} field {field!r} should be {base}, got {type(v).__name__}"
    return None


_TYPES: dict[str, list[tuple[str, Any]]] = {}


def _record_types(name: str) -> list[tuple[str, Any]]:
    if name not in _TYPES:
        _TYPES[name] = list(events.record_fields(name).items())
    return _TYPES[name]


def _json_is(v: Any, tp: Any) -> bool:
    """Does value ``v`` fit catalogue type ``tp`` (as the Spark reader will read it)?"""
    if tp is bool:
        return isinstance(v, bool)
    if tp is int:
        return isinstance(v, int) and not isinstance(v, bool)
    if tp is float:
        return isinstance(v, int | float) and not isinstance(v, bool)
    if tp is str:
        return True  # the reader keeps any JSON value of a string column as text
    origin = getattr(tp, "__origin__", None)
    if origin is list:
        (item,) = tp.__args__
        return isinstance(v, list | tuple) and all(_json_is(x, item) for x in v)
    if origin is dict:
        return isinstance(v, dict) and all(_json_is(x, tp.__args__[1]) for x in v.values())
    return True  # Json


def check_catalogued(strict: bool) -> Callable[[Any, str, dict[str, Any]], dict[str, Any]]:
    """A structlog processor: strict raises `UncataloguedEvent` (tests run strict, so code that
    logs a name or field the catalogue lacks fails them); otherwise the line is written with
    ``uncatalogued: true``."""

    def check(_logger: Any, _method: str, ed: dict[str, Any]) -> dict[str, Any]:
        problem = catalogue_problem(ed)
        if problem is not None:
            if strict:
                raise UncataloguedEvent(problem)
            ed["uncatalogued"] = True
        return ed

    return check


def json_line(node: str, role: str, method: str, ed: dict[str, Any]) -> dict[str, Any]:
    """The JSON line of one structlog event dict (the common schema first; ``node``/``role``
    bound as context variables win over the process's, as in the simulation's processes)."""
    exc = ed.pop("exc_info", None)
    if exc:
        if exc is True:
            exc = sys.exc_info()[1]
        if isinstance(exc, BaseException):
            ed["exception"] = "".join(traceback.format_exception(exc)).rstrip()
    line = {
        "ts": _iso(wallclock_ms()),
        "level": method if method != "exception" else "error",
        "node": ed.pop("node", node),
        "role": ed.pop("role", role),
        "actor": ed.pop("actor", ed.pop("logger", "")),
        "event": ed.pop("event", ""),
    }
    for k, v in ed.items():  # an event field never overwrites the common schema
        line[f"{k}_field" if k in line else k] = v
    return line


class _Sink:
    """Final processor: writes the JSON line and the console line, then drops the event."""

    def __init__(
        self, node: str, role: str, json_out: TextIO | None, console: TextIO | None
    ) -> None:
        self.node, self.role = node, role
        self.json_out, self.console = json_out, console

    def __call__(self, _logger: Any, method: str, ed: dict[str, Any]) -> Any:
        line = json_line(self.node, self.role, method, ed)
        if self.json_out is not None:
            self.json_out.write(json.dumps(line, default=str, separators=(",", ":")) + "\n")
            self.json_out.flush()
        if self.console is not None:
            extra = " ".join(
                f"{k}={v}"
                for k, v in line.items()
                if k not in ("ts", "level", "node", "role", "actor", "event", "exception")
            )
            self.console.write(
                f"{line['ts'][11:23]} {line['level'][:4].upper():4} {self.node} "
                f"{line['actor']}: {line['event']} {extra}\n"
            )
            if "exception" in line:
                self.console.write(line["exception"] + "\n")
            self.console.flush()
        raise structlog.DropEvent


def _add_logger_name(logger: Any, _m: str, ed: dict[str, Any]) -> dict[str, Any]:
    if "actor" not in ed and "logger" not in ed:
        name = getattr(logger, "name", None)
        if name:
            ed["actor"] = name
    return ed


class _NamedLogger:
    def __init__(self, name: str = "") -> None:
        self.name = name

    def msg(self, *args: Any, **kw: Any) -> None:  # pragma: no cover - the sink drops events
        pass

    debug = info = warning = warn = error = critical = exception = log = msg


def configure_logging(
    node: str,
    role: str,
    log_dir: str | None = None,
    *,
    console: TextIO | None = sys.stderr,
    level: str = "info",
    strict: bool = False,
) -> str | None:
    """Set up logging for this process; returns the JSON log file path (or None)."""
    json_out: TextIO | None = None
    path = None
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        path = os.path.join(log_dir, f"{node}.jsonl")
        json_out = open(path, "a", encoding="utf-8", buffering=1)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            _add_logger_name,
            check_catalogued(strict),
            _Sink(node, role, json_out, console),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=lambda *a: _NamedLogger(a[0] if a else ""),
        cache_logger_on_first_use=False,
    )
    return path
