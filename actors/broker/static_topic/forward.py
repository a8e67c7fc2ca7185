"""Delayed and transactional messages of a static topic whose logic queue moved (issue 30
item 6; rocketrio's design: upstream re-puts them to the physical queue they were sent to).

A delayed send, or a transactional half, to a logic queue waits on the broker that led the
queue when it was sent, with the physical queue of that generation as its REAL_QID. When it is
due (the schedule service) or committed (the transaction service), a remapping may have sealed
that generation: a message put there would lie past the generation's end, where no logic read
finds it. `StaticTopicForwarder.reroute` runs before those puts:

- a message to a physical queue that is still its logic queue's newest generation here, or to a
  topic that is not static here, is stored here unchanged;
- a logic queue this broker still leads with a newer generation here: stored in that one;
- a logic queue led by another broker now: sent there as an ordinary SEND_MESSAGE to the
  logic queue (queueId = the logic id), without the properties that would make the new leader
  delay it again or take it for a half (DELAY, TIMER_*, TRAN_MSG). The put the caller then
  makes holds the rest.

A forward that fails (no answer, a refusal) makes `reroute` return why: the caller keeps the
entry and tries again later (the schedule's offset does not move, the commit is not written),
so a batch half forwarded may be forwarded twice (at least once, like every retried send).
"""

from __future__ import annotations

from typing import Any

from rocketrio.actors.broker.static_topic.remote import RemoteBrokers, RemoteUnavailable
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingManager
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import SendMessageRequestHeader
from rocketrio.protocol.message_format import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK_TYPE,
    decode_properties,
    encode_properties,
)
from rocketrio.protocol.static_topic import TopicQueueMappingDetail
from rocketrio.storage.store_types import MessageToStore

DROPPED_ON_FORWARD = (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TIMER_DELAY_SEC,
    "TIMER_DELAY_MS",
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
)
FORWARD_GROUP = "CID_RMQ_SYS_STATIC_TOPIC_FORWARD"


def logic_target(detail: TopicQueueMappingDetail, physical_qid: int) -> tuple[int, str, int] | None:
    """(logic id, the broker leading it, its leader's physical queue) of this broker's
    physical queue ``physical_qid``; None when no generation here is that queue."""
    for gid, items in detail.hostedQueues.items():
        if any(i.bname == detail.bname and i.queueId == physical_qid for i in items):
            leader = items[-1]
            return gid, leader.bname, leader.queueId
    return None


class StaticTopicForwarder:
    """`reroute` for the schedule and transaction services (module docstring)."""

    def __init__(self, mappings: TopicQueueMappingManager, remote: RemoteBrokers, log: Any) -> None:
        self.mappings = mappings
        self.remote = remote
        self.log = log

    async def reroute(self, msgs: list[MessageToStore]) -> list[MessageToStore] | str:
        """The messages to store here; the others were forwarded. A string: why a forward
        failed (nothing may be taken as stored)."""
        local: list[MessageToStore] = []
        for msg in msgs:
            detail = self.mappings.get(msg.topic)
            target = None if detail is None else logic_target(detail, msg.queue_id)
            if detail is None or target is None:
                local.append(msg)
                continue
            gid, bname, leader_qid = target
            if bname == detail.bname:
                msg.queue_id = leader_qid
                local.append(msg)
                continue
            failed = await self._forward(msg, gid, bname)
            if failed is not None:
                return failed
        return local

    async def _forward(self, msg: MessageToStore, gid: int, bname: str) -> str | None:
        props = msg.properties
        props = dict(decode_properties(props) if isinstance(props, str) else props)
        for key in DROPPED_ON_FORWARD:
            props.pop(key, None)
        # the message's own flags (a compressed body stays readable), not a transaction's type
        sys_flag = msg.sys_flag & ~TRANSACTION_ROLLBACK_TYPE
        h = SendMessageRequestHeader(
            FORWARD_GROUP, msg.topic, "TBW102", 4, gid, sys_flag, msg.born_timestamp, msg.flag,
            encode_properties(props), msg.reconsume_times,
        )  # fmt: skip
        try:
            resp = await self.remote.call(bname, msg.topic, RequestCode.SEND_MESSAGE, h, msg.body)
        except RemoteUnavailable as e:
            error = str(e)
        else:
            if resp.code == ResponseCode.SUCCESS:
                events.emit(
                    self.log,
                    events.StaticTopicMessageForwarded(topic=msg.topic, queue_id=gid, to=bname),
                )
                return None
            error = f"broker {bname}: {resp.code} {resp.remark}"
        events.emit(
            self.log,
            events.StaticTopicRemoteReadFailed(
                topic=msg.topic, queue_id=gid, item_broker=bname, call="SEND_MESSAGE (forward)",
                error=error,
            ),
        )  # fmt: skip
        return f"forwarding to the leader of {msg.topic}-{gid}: {error}"
