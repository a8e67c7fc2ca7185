"""The Spark read schema of the JSON log lines, generated from the log-event catalogue.

`rocketrio.actors.observe.events.field_types()` is the one place that names every field a line can
carry; this module only maps its Python types to Spark types, so the log writer and the job
cannot drift apart. Every column is nullable: one line carries the fields of one event.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from rocketrio.actors.observe import events

CORRUPT = "_corrupt_record"

_SCALARS: dict[Any, T.DataType] = {
    str: T.StringType(),
    int: T.LongType(),
    float: T.DoubleType(),
    bool: T.BooleanType(),
    events.Json: T.StringType(),  # Spark's JSON reader keeps a nested value's JSON text
}


def spark_type(tp: Any) -> T.DataType:
    """The Spark type of one catalogue field type (without ``| None``)."""
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin = getattr(tp, "__origin__", None)
    args = getattr(tp, "__args__", ())
    if origin is list and len(args) == 1 and args[0] in (str, int):
        return T.ArrayType(_SCALARS[args[0]])
    if origin is dict and args == (str, int):
        return T.MapType(T.StringType(), T.LongType())
    raise TypeError(f"no Spark type for log field type {tp!r}")


def log_schema() -> T.StructType:
    """Every catalogued field as a nullable column, plus the corrupt-record column."""
    fields = [
        T.StructField(name, spark_type(tp), nullable=True)
        for name, tp in sorted(events.field_types().items())
    ]
    fields.append(T.StructField(CORRUPT, T.StringType(), nullable=True))
    return T.StructType(fields)


def required_fields() -> dict[str, list[str]]:
    """event name -> the fields its record declares without ``| None`` (a line lacking one is
    reported as a bad line)."""
    out: dict[str, list[str]] = {}
    for name in events.CATALOGUE:
        out[name] = [
            f for f, tp in events.record_fields(name).items() if not events.strip_optional(tp)[1]
        ]
    return out
