"""The remoting side of sending (actors/broker/send/handlers.py): the send header's fast path
agrees with cattrs and names a bad field; every PutStatus becomes upstream's response code and
remark.
"""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.dispatch.outcomes import PutFailed, PutStatus, SendStored
from rocketrio.actors.broker.send.handlers import (
    PUT_STATUS_CODES,
    parse_send_header_v2,
    send_back_response,
    send_response,
)
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import SendMessageRequestHeaderV2, SendMessageResponseHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, to_ext

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


CMD = RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=42)


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (PutStatus.PUT_OK, RC.SUCCESS),
        (PutStatus.FLUSH_DISK_TIMEOUT, RC.FLUSH_DISK_TIMEOUT),
        (PutStatus.FLUSH_SLAVE_TIMEOUT, RC.FLUSH_SLAVE_TIMEOUT),
        (PutStatus.SLAVE_NOT_AVAILABLE, RC.SLAVE_NOT_AVAILABLE),
        (PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, RC.SYSTEM_ERROR),
        (PutStatus.SERVICE_NOT_AVAILABLE, RC.SERVICE_NOT_AVAILABLE),
        (PutStatus.MESSAGE_ILLEGAL, RC.MESSAGE_ILLEGAL),
        (PutStatus.OS_PAGE_CACHE_BUSY, RC.SYSTEM_ERROR),
        (PutStatus.UNKNOWN_ERROR, RC.SYSTEM_ERROR),
    ],
)
def test_every_put_status_maps_to_upstreams_response_code(status: PutStatus, code: int) -> None:
    if status.stored:
        resp = send_response(CMD, SendStored(status, None, "OFFSETID", 3, 17, "UNIQ"))
        assert resp.ext_fields == {
            "msgId": "OFFSETID",
            "queueId": "3",
            "queueOffset": "17",
            "transactionId": "UNIQ",
        }
        # the hand-built ext fields are the cattrs header's, key for key
        assert resp.ext_fields == to_ext(SendMessageResponseHeader("OFFSETID", 3, 17, "UNIQ"))
    else:
        resp = send_response(CMD, PutFailed(status, None))
        assert resp.ext_fields == {} and resp.remark
    assert (resp.code, resp.opaque, resp.is_response) == (code, 42, True)


def test_put_status_table_is_complete_and_remarks_follow_upstream() -> None:
    assert set(PUT_STATUS_CODES) == set(PutStatus)
    assert {s for s in PutStatus if s.stored} == {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
    failed = send_response(CMD, PutFailed(PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, None))
    assert failed.remark == "in-sync replicas not enough"
    detailed = send_response(CMD, PutFailed(PutStatus.MESSAGE_ILLEGAL, "the message is illegal: x"))
    assert detailed.remark == "the message is illegal: x"  # the store's own remark wins
    back = send_back_response(CMD, PutFailed(PutStatus.MESSAGE_ILLEGAL, "bad"))
    assert (back.code, back.remark) == (RC.SYSTEM_ERROR, "bad")
