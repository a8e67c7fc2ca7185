"""The remoting adapter's pure parts (actors/broker/dispatch/adapter.py): the send header's fast
path agrees with cattrs and names a bad field; the store's pull statuses as response codes.
"""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.dispatch.adapter import parse_send_header_v2, pull_code
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import SendMessageRequestHeaderV2
from rocketrio.protocol.serde import HeaderError, from_ext
from rocketrio.storage.message_store import GetMessageStatus as S

_BASE = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "-1", "f": "0", "g": "17", "h": "3"}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"i": "TAGS\x01a\x02", "j": "2", "l": "16", "k": "false", "m": "true", "n": "broker-a"},
        {"k": "1", "m": "0"},
        {"m": ""},
    ],
)
def test_fast_send_header_matches_cattrs(extra: dict[str, str]) -> None:
    ext = {**_BASE, **extra}
    assert parse_send_header_v2(ext) == from_ext(SendMessageRequestHeaderV2, ext).to_v1()


@pytest.mark.parametrize(
    ("ext", "field"),
    [
        ({k: v for k, v in _BASE.items() if k != "b"}, "b"),
        ({**_BASE, "d": "four"}, "d"),
        ({**_BASE, "m": "maybe"}, "m"),
    ],
)
def test_fast_send_header_errors_name_the_field(ext: dict[str, str], field: str) -> None:
    with pytest.raises(HeaderError, match=field):
        parse_send_header_v2(ext)


@pytest.mark.parametrize(
    ("status", "offset", "code"),
    [
        (S.FOUND, 3, ResponseCode.SUCCESS),
        (S.NO_MATCHED_MESSAGE, 3, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (S.MESSAGE_WAS_REMOVING, 3, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (S.OFFSET_OVERFLOW_ONE, 3, ResponseCode.PULL_NOT_FOUND),
        (S.OFFSET_OVERFLOW_BADLY, 3, ResponseCode.PULL_OFFSET_MOVED),
        (S.OFFSET_TOO_SMALL, 3, ResponseCode.PULL_OFFSET_MOVED),
        (S.NO_MESSAGE_IN_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
        (S.NO_MESSAGE_IN_QUEUE, 3, ResponseCode.PULL_OFFSET_MOVED),
        (S.NO_MATCHED_LOGIC_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
    ],
)
def test_pull_status_mapping(status: S, offset: int, code: int) -> None:
    assert pull_code(status, offset) == code
