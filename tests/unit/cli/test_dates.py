"""The CLI's dates (cli/dates.py): local ISO-8601 with milliseconds and offset, timestamp keys."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from rocketrio.cli.dates import dated_kv, format_ms

IST = dt.timezone(dt.timedelta(hours=5, minutes=30))


def test_format_ms_is_local_iso_with_ms_and_offset() -> None:
    assert format_ms(1_700_000_000_123, dt.UTC) == "2023-11-14T22:13:20.123+00:00"
    assert format_ms(1_700_000_000_123, IST) == "2023-11-15T03:43:20.123+05:30"
    assert format_ms("1700000000005", IST) == "2023-11-15T03:43:20.005+05:30"
    assert format_ms(0) == format_ms(-1) == format_ms(None) == format_ms("") == "-"


@given(st.integers(min_value=1, max_value=4_102_444_800_000))
def test_format_ms_round_trips_to_the_millisecond(ms: int) -> None:
    text = format_ms(ms, IST)
    back = dt.datetime.fromisoformat(text)
    assert round(back.timestamp() * 1000) == ms


def test_dated_kv_converts_only_timestamp_keys() -> None:
    kv = {"bootTimestamp": "1700000000123", "commitLogMaxOffset": "1700000000123", "x": "y"}
    assert dated_kv(kv, dt.UTC) == {
        "bootTimestamp": "2023-11-14T22:13:20.123+00:00",
        "commitLogMaxOffset": "1700000000123",
        "x": "y",
    }
