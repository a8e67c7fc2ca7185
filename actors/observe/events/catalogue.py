"""The catalogue's machinery: the `@event` registry, `LogEvent`, `emit` and the field types.

The records themselves live in the sibling modules of this package, one per role; the package
(`rocketrio.actors.observe.events`) imports them all and re-exports this module's names.

Field types are JSON types: ``str``, ``int``, ``float``, ``bool``, ``list[str]``,
``list[int]``, ``dict[str, int]``, `Json` (any JSON value, read back as its JSON text), each
optionally ``| None``. A field name means one thing (one type) across the catalogue.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, NewType

import attrs

#: any JSON value; the reader keeps it as JSON text
Json = NewType("Json", object)

#: the common schema of every line (written by actors/observe/logs.py, not by a record)
COMMON_FIELDS: dict[str, Any] = {
    "ts": str,
    "level": str,
    "node": str,
    "role": str,
    "actor": str,
    "event": str,
}
#: fields that bound loggers add to many lines (structlog ``bind``), and the exception text
CONTEXT_FIELDS: dict[str, Any] = {
    "broker": str | None,
    "client_id": str | None,
    "exception": str | None,
    "uncatalogued": bool | None,  # non-strict logging wrote a name the catalogue lacks
}

LEVELS = ("debug", "info", "warning", "error", "critical")


class LogEvent:
    """Base of every catalogued record: `NAME` is the ``event`` of its lines, `LEVEL` their
    level."""

    NAME: ClassVar[str]
    LEVEL: ClassVar[str]


CATALOGUE: dict[str, type[LogEvent]] = {}

_E = typing.TypeVar("_E", bound=type[LogEvent])


def event(name: str, level: str = "info") -> Callable[[_E], _E]:
    """Register an attrs record class as the catalogue's event ``name``."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r} for event {name!r}")

    def register(cls: _E) -> _E:
        if not attrs.has(cls):
            raise TypeError(f"{cls.__name__}: decorate with @attrs.frozen(kw_only=True) first")
        if name in CATALOGUE:
            raise ValueError(f"event {name!r} declared twice")
        cls.NAME, cls.LEVEL = name, level
        CATALOGUE[name] = cls
        return cls

    return register


def emit(log: Any, ev: LogEvent, *, level: str | None = None, **extra: Any) -> None:
    """Log one record through a structlog (bound) logger, at its `LEVEL` unless ``level``
    says otherwise (the same happening can be worse in one place). ``extra`` carries only
    `CONTEXT_FIELDS` and an exception's ``exc_info``."""
    fields = {f.name: getattr(ev, f.name) for f in attrs.fields(type(ev))}  # type: ignore[arg-type]
    getattr(log, level or ev.LEVEL)(ev.NAME, **fields, **extra)


def _resolve(cls: type[LogEvent]) -> dict[str, Any]:
    # the annotations are strings (postponed evaluation): resolve them in the module that
    # declares the record (its role module), with `Json` known even where it is not imported
    hints = typing.get_type_hints(cls, localns={"Json": Json}, include_extras=False)
    return {f.name: hints[f.name] for f in attrs.fields(cls)}  # type: ignore[arg-type]


def record_fields(name: str) -> dict[str, Any]:
    """The declared fields (name -> type) of event ``name``."""
    return _resolve(CATALOGUE[name])


def strip_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (tp, False)."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
        raise TypeError(f"unions other than X | None are not log field types: {tp}")
    return tp, False


def field_types() -> dict[str, Any]:
    """Every field any line can carry -> its type (without ``| None``): the common schema, the
    context fields, and the union of the records' fields. A name with two types is an error."""
    out: dict[str, Any] = {}
    where: dict[str, str] = {}
    sources: list[tuple[str, dict[str, Any]]] = [
        ("common schema", COMMON_FIELDS),
        ("context fields", CONTEXT_FIELDS),
        *((n, _resolve(c)) for n, c in sorted(CATALOGUE.items())),
    ]
    for source, fields in sources:
        for fname, tp in fields.items():
            base, _ = strip_optional(tp)
            if fname in out and {out[fname], base} == {str, Json}:
                out[fname] = Json  # both are text to the reader; Json keeps nested values
                continue
            if fname in out and out[fname] != base:
                raise TypeError(
                    f"log field {fname!r} is {out[fname]} in {where[fname]} but {base} in {source}"
                )
            out.setdefault(fname, base)
            where.setdefault(fname, source)
    return out
