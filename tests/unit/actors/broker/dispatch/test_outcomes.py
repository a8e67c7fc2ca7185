"""Outcomes to wire codes (actors/broker/dispatch/outcomes.py): every PutStatus to upstream's
response code and remark, pull outcomes to pull codes.
"""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.dispatch.adapter import (
    PULL_CODES,
    PUT_STATUS_CODES,
    pull_response,
    send_back_response,
    send_response,
)
from rocketrio.actors.broker.dispatch.outcomes import (
    Pulled,
    PullStatus,
    PutFailed,
    PutStatus,
    Refusal,
    SendStored,
)
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.storage.message_store import (
    GetMessageStatus,
    GetResult,
)
from tests.harness.processors import (
    RC,
)

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


def test_pull_outcomes_map_to_pull_codes() -> None:
    assert set(PULL_CODES) == set(PullStatus)
    result = GetResult(GetMessageStatus.FOUND, 5, 0, 9, [b"r1", b"r2"], 2)
    resp = pull_response(CMD, Pulled(PullStatus.FOUND, result))
    assert (resp.code, resp.remark, resp.body) == (RC.SUCCESS, "FOUND", b"r1r2")
    assert resp.ext_fields == {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": "5",
        "minOffset": "0",
        "maxOffset": "9",
    }
    moved = GetResult(GetMessageStatus.OFFSET_TOO_SMALL, 4, 4, 9)
    resp = pull_response(CMD, Pulled(PullStatus.OFFSET_ILLEGAL, moved))
    assert (resp.code, resp.remark, resp.body) == (RC.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL", b"")
    resp = pull_response(CMD, Refusal(RC.TOPIC_NOT_EXIST, "no topic"))
    assert (resp.code, resp.remark) == (RC.TOPIC_NOT_EXIST, "no topic")
