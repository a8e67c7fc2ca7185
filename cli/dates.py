"""Epoch milliseconds as dates for people: local time, ISO-8601, milliseconds and UTC offset.

    format_ms(1700000000123)  ->  "2023-11-14T23:13:20.123+01:00"   (in Europe/Paris)

The human tables of ``rocketrio admin`` print every timestamp this way; ``--json`` output keeps
the raw epoch milliseconds the servers send. A zero or negative value means "never" upstream
(a queue without messages, a consumer without offsets) and prints as ``-``.
"""

from __future__ import annotations

import datetime as dt

NEVER = "-"

# The broker runtime keys (GET_BROKER_RUNTIME_INFO) that carry epoch milliseconds.
TIMESTAMP_KEY_SUFFIXES = ("Timestamp", "TimeStamp", "StoreTime")


def format_ms(epoch_ms: int | str | None, tz: dt.tzinfo | None = None) -> str:
    """``epoch_ms`` as local ISO-8601 with ms and offset; ``tz`` overrides the local zone."""
    if epoch_ms is None or epoch_ms == "":
        return NEVER
    ms = int(epoch_ms)
    if ms <= 0:
        return NEVER
    when = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    local = when.astimezone(tz) if tz is not None else when.astimezone()
    return local.isoformat(timespec="milliseconds")


def is_timestamp_key(key: str) -> bool:
    """A runtime-info key whose value is epoch milliseconds (bootTimestamp, ...)."""
    return key.endswith(TIMESTAMP_KEY_SUFFIXES)


def dated_kv(kv: dict[str, str], tz: dt.tzinfo | None = None) -> dict[str, str]:
    """A key/value table with the epoch-ms values of timestamp keys shown as dates."""
    out = {}
    for k, v in kv.items():
        out[k] = format_ms(v, tz) if is_timestamp_key(k) and v.lstrip("-").isdigit() else v
    return out
