"""Pulling from a static topic's logic queue (RIP-21 S4; upstream PullMessageProcessor
rewriteRequestForStaticTopic / rewriteResponseForStaticTopic).

Only the logic queue's leader serves it (others: NOT_LEADER_FOR_QUEUE). The logic offset asked
for is translated to the generation (item) holding it (`plan_pull`, pure):

- an offset before the first generation answers PULL_OFFSET_MOVED with the first valid offset
  (upstream #5493: never an exception, never a read of another queue);
- an offset in the hole a remapping leaves between two generations (the new one starts at the
  next 10,000 block) or at the end of a sealed generation answers PULL_RETRY_IMMEDIATELY with
  the next generation's first offset;
- otherwise the item's physical queue is read at ``offset - logicOffset + startOffset``, at
  most up to the item's end: locally when the item is this broker's (the leader's item keeps
  long polling), or on the item's broker with a plain physical PULL_MESSAGE (``lo=false``, no
  suspend, no commit: `static_topic_remote`).

The answer (`rewrite_pull`, pure) carries logic next/min/max offsets and OffsetDelta (logic -
physical of the item): the records keep their physical queue offsets, the client adds the
delta, as upstream. A generation read to its end continues into the next one. The commit offset
a pull carries is stored as a logic value under the logic queue id here, on the leader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from rocketrio.actors.broker.dispatch.answers import refused
from rocketrio.actors.broker.dispatch.held_reply import HeldReply
from rocketrio.actors.broker.dispatch.outcomes import PullOutcome, Refusal
from rocketrio.actors.broker.dispatch.table import Handler
from rocketrio.actors.broker.pull.handlers import pull_response
from rocketrio.actors.broker.pull.processor import PullMessageProcessor
from rocketrio.actors.broker.static_topic.remote import RemoteBrokers, RemoteUnavailable
from rocketrio.actors.broker.tables.consumer_offset import ConsumerOffsetManager
from rocketrio.actors.broker.tables.topic_queue_mapping import (
    TopicQueueMappingManager,
    leader_items,
)
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUSPEND,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from rocketrio.protocol.static_topic import (
    LogicQueueMappingItem,
    TopicQueueMappingDetail,
    find_item,
    is_logic_broker_name,
)

RC = ResponseCode
PULL_ANSWER_CODES = frozenset(
    {RC.SUCCESS, RC.PULL_NOT_FOUND, RC.PULL_RETRY_IMMEDIATELY, RC.PULL_OFFSET_MOVED}
)


def not_leader(topic: str, gid: int, bname: str) -> Refusal:
    return Refusal(
        RC.NOT_LEADER_FOR_QUEUE,
        f"{topic}-{gid} is not led by broker {bname}: refresh the topic's route",
    )


@attrs.frozen
class PullPlan:
    """Where a logic pull reads: ``item``'s physical queue at ``physical_offset``."""

    logic_offset: int
    item: LogicQueueMappingItem
    physical_offset: int
    max_msgs: int
    leader: bool  # the item is the logic queue's newest (writable) generation
    earliest: bool  # no decided generation is older
    next_item: LogicQueueMappingItem | None  # the next decided generation
    max_logic: int  # the largest logic offset the mapping itself knows (upstream
    # computeMaxOffsetFromMapping)


@attrs.frozen
class PullAnswer:
    """A logic pull answered from the mapping alone, without a read."""

    code: int
    next_offset: int
    min_offset: int
    max_offset: int


def plan_pull(
    detail: TopicQueueMappingDetail, gid: int, logic_offset: int, max_msgs: int
) -> PullPlan | PullAnswer | Refusal:
    items = leader_items(detail, gid)
    if items is None:
        return not_leader(detail.topic, gid, detail.bname)
    decided = [i for i in items if i.logic_decided()]
    if not decided:  # a new leader whose offsets a remapping has not decided yet
        return PullAnswer(RC.PULL_NOT_FOUND, logic_offset, 0, 0)
    max_logic = max(decided[-1].logicOffset, decided[-1].max_static_offset())
    item = find_item(decided, logic_offset, ignore_negative=True)
    assert item is not None
    i = decided.index(item)
    nxt = decided[i + 1] if i + 1 < len(decided) else None
    if logic_offset < item.logicOffset:  # before the first generation (upstream #5493)
        return PullAnswer(RC.PULL_OFFSET_MOVED, item.logicOffset, item.logicOffset, max_logic)
    physical = logic_offset - item.offset_delta()
    if item.end_decided():
        left = item.endOffset - physical
        if left <= 0:  # past a sealed generation (its end, or the hole after it)
            if nxt is None:
                return PullAnswer(RC.PULL_NOT_FOUND, logic_offset, item.logicOffset, max_logic)
            return PullAnswer(
                RC.PULL_RETRY_IMMEDIATELY, nxt.logicOffset, item.logicOffset, max_logic
            )
        max_msgs = min(max_msgs, left)
    return PullPlan(
        logic_offset, item, physical, max_msgs, item is items[-1], i == 0, nxt, max_logic
    )


@attrs.frozen
class LogicPullHeader:
    code: int
    next_offset: int
    min_offset: int
    max_offset: int
    offset_delta: int


def rewrite_pull(plan: PullPlan, code: int, next_p: int, min_p: int, max_p: int) -> LogicPullHeader:
    """A physical pull answer in logic terms (see the module docstring)."""
    item, nxt = plan.item, plan.next_item
    if code != RC.SUCCESS:
        if plan.physical_offset < min_p:  # below what the queue still holds
            code = RC.PULL_OFFSET_MOVED if plan.earliest else RC.PULL_RETRY_IMMEDIATELY
            next_p = min_p
        elif plan.physical_offset >= max_p and not plan.leader:
            # an older generation read to its end: go on with the next one
            if nxt is not None:
                code, next_p = (
                    RC.PULL_RETRY_IMMEDIATELY,
                    item.endOffset if item.end_decided() else max_p,
                )
            else:
                code = RC.PULL_NOT_FOUND
        elif code == RC.PULL_OFFSET_MOVED and plan.physical_offset > max_p:
            next_p = max_p
    low = item.static_offset_strictly(max(item.startOffset, min_p))
    high = max(item.static_offset_strictly(max_p), plan.max_logic)
    if item.end_decided() and next_p >= item.endOffset:
        next_logic = nxt.logicOffset if nxt is not None else item.max_static_offset()
    elif not plan.leader and nxt is not None and next_p >= max_p and code != RC.SUCCESS:
        next_logic = nxt.logicOffset
    else:
        next_logic = item.static_offset_strictly(next_p)
    return LogicPullHeader(code, next_logic, low, high, item.offset_delta())


def logic_response(
    cmd: RemotingCommand, resp: RemotingCommand, plan: PullPlan, local: bool = False
) -> RemotingCommand:
    """``resp`` (a physical pull's answer) as the answer to the logic pull ``cmd``;
    ``local``: read from this broker's own store, whose replica suggestion is passed on."""
    if resp.code not in PULL_ANSWER_CODES:
        return cmd.make_response(resp.code, resp.remark)
    ext = resp.ext_fields
    out = rewrite_pull(
        plan,
        resp.code,
        int(ext["nextBeginOffset"]),
        int(ext["minOffset"]),
        int(ext["maxOffset"]),
    )
    header = PullMessageResponseHeader(
        # this broker's own generation: its suggestion (slaveReadEnable: a consumer far behind
        # is sent to this set's slave, which holds the set's mappings, slave_sync.py); a
        # remote broker's replica ids mean nothing to this broker's consumers
        int(ext.get("suggestWhichBrokerId", 0)) if local else 0,
        out.next_offset,
        out.min_offset,
        out.max_offset,
        offsetDelta=out.offset_delta,
    )
    body = resp.body if out.code == RC.SUCCESS else b""
    return cmd.make_response(out.code, resp.remark, to_ext(header), body)


def answer_response(cmd: RemotingCommand, a: PullAnswer) -> RemotingCommand:
    header = PullMessageResponseHeader(0, a.next_offset, a.min_offset, a.max_offset)
    return cmd.make_response(a.code, "static topic: answered from the mapping", to_ext(header))


def logic_pull_response(
    plan: PullPlan,
) -> Callable[[RemotingCommand, PullOutcome], RemotingCommand]:
    """The encoder of a held local pull: the plain answer rewritten to logic offsets."""

    def encode(cmd: RemotingCommand, outcome: PullOutcome) -> RemotingCommand:
        return logic_response(cmd, pull_response(cmd, outcome), plan, local=True)

    return encode


def unmapped_response(cmd: RemotingCommand) -> RemotingCommand:
    h = from_ext(PullMessageRequestHeader, cmd.ext_fields)
    header = PullMessageResponseHeader(0, h.queueOffset, 0, 0)
    return cmd.make_response(
        RC.PULL_RETRY_IMMEDIATELY,
        f"{h.topic}-{h.queueId} is a logic queue this broker has no mapping of: ask the master",
        to_ext(header),
    )


def physical_header(
    h: PullMessageRequestHeader, plan: PullPlan, local: bool
) -> PullMessageRequestHeader:
    """The request for the item's physical queue: never a commit (done here, as a logic
    value); long polling only on the leader's own generation."""
    flags = h.sysFlag & ~PULL_FLAG_COMMIT_OFFSET
    if not (local and plan.leader):
        flags &= ~PULL_FLAG_SUSPEND
    return attrs.evolve(
        h,
        queueId=plan.item.queueId,
        queueOffset=plan.physical_offset,
        maxMsgNums=plan.max_msgs,
        sysFlag=flags,
        commitOffset=-1,
        bname=plan.item.bname,
        lo=False,
    )


def pull_handlers(
    mappings: TopicQueueMappingManager,
    pull: PullMessageProcessor,
    offsets: ConsumerOffsetManager,
    remote: RemoteBrokers,
    plain: Mapping[int, Handler],
    log: Any,
    is_master: Callable[[], bool] = lambda: True,
) -> dict[int, Handler]:
    """PULL_MESSAGE for logic queues; every other pull goes to the ``plain`` handler. A
    replica (``is_master`` false) serves logic pulls from its synced mapping and stores no
    commit offset (its offsets come from the master)."""
    plain_pull = plain[RequestCode.PULL_MESSAGE]

    async def handle(ctx: RequestContext) -> RemotingCommand | None:
        cmd = ctx.cmd
        ext = cmd.ext_fields
        topic = ext.get("topic")
        if topic is None or ext.get("lo") == "false":
            return await plain_pull(ctx)
        detail = mappings.get(topic)
        if detail is None:
            if is_logic_broker_name(ext.get("bname") or ""):
                # a logic queue asked of a broker without the mapping (a slave that has not
                # synced it yet): never the physical queue numbered like it; back to the master
                return unmapped_response(cmd)
            return await plain_pull(ctx)
        h = from_ext(PullMessageRequestHeader, ext)
        plan = plan_pull(detail, h.queueId, h.queueOffset, h.maxMsgNums)
        if isinstance(plan, Refusal):
            return refused(cmd, plan)
        if h.sysFlag & PULL_FLAG_COMMIT_OFFSET and h.commitOffset >= 0 and is_master():
            offsets.commit(h.consumerGroup, topic, h.queueId, h.commitOffset)  # logic
        if isinstance(plan, PullAnswer):
            return answer_response(cmd, plan)
        if plan.item.bname == detail.bname:
            encode = logic_pull_response(plan)
            outcome = await pull.pull(physical_header(h, plan, True), HeldReply(ctx, encode))
            return None if outcome is None else encode(cmd, outcome)
        try:
            resp = await remote.call(
                plan.item.bname, topic, RequestCode.PULL_MESSAGE, physical_header(h, plan, False)
            )
        except RemoteUnavailable as e:
            events.emit(
                log,
                events.StaticTopicRemoteReadFailed(
                    topic=topic,
                    queue_id=h.queueId,
                    item_broker=plan.item.bname,
                    call="PULL_MESSAGE",
                    error=str(e),
                ),
            )
            return cmd.make_response(RC.SYSTEM_ERROR, f"static topic remote read: {e}")
        return logic_response(cmd, resp, plan)

    return {RequestCode.PULL_MESSAGE: handle}
