"""The remoting side of pulling (actors/broker/pull/handlers.py): the store's pull statuses as
response codes, and pull outcomes as upstream's pull answer.
"""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.dispatch.outcomes import Pulled, PullStatus, Refusal
from rocketrio.actors.broker.pull.handlers import PULL_CODES, pull_code, pull_response
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.storage.message_store import GetMessageStatus, GetResult
from rocketrio.storage.message_store import GetMessageStatus as S

CMD = RemotingCommand(RequestCode.PULL_MESSAGE, opaque=42)


@pytest.mark.parametrize(
    ("status", "offset", "code"),
    [
        (S.FOUND, 3, RC.SUCCESS),
        (S.NO_MATCHED_MESSAGE, 3, RC.PULL_RETRY_IMMEDIATELY),
        (S.MESSAGE_WAS_REMOVING, 3, RC.PULL_RETRY_IMMEDIATELY),
        (S.OFFSET_OVERFLOW_ONE, 3, RC.PULL_NOT_FOUND),
        (S.OFFSET_OVERFLOW_BADLY, 3, RC.PULL_OFFSET_MOVED),
        (S.OFFSET_TOO_SMALL, 3, RC.PULL_OFFSET_MOVED),
        (S.NO_MESSAGE_IN_QUEUE, 0, RC.PULL_NOT_FOUND),
        (S.NO_MESSAGE_IN_QUEUE, 3, RC.PULL_OFFSET_MOVED),
        (S.NO_MATCHED_LOGIC_QUEUE, 0, RC.PULL_NOT_FOUND),
    ],
)
def test_pull_status_mapping(status: S, offset: int, code: int) -> None:
    assert pull_code(status, offset) == code


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
