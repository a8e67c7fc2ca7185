"""Moving a consumer group's offsets from the admin side (upstream DefaultMQAdminExtImpl's
resetOffsetByTimestamp, resetOffsetByTimestampOld, resetOffsetByQueueId and cloneGroupOffset).

`reset_offset_by_timestamp` asks every broker set of the topic's route (its master) with
INVOKE_BROKER_TO_RESET_OFFSET; the broker commits the new offsets and tells the group's online
members. A broker that answers CONSUMER_NOT_ONLINE (no member online there) is reset the "old"
way, as mqadmin does: the group's committed offsets are read (GET_CONSUME_STATS), each queue's
offset for the timestamp found (SEARCH_OFFSET_BY_TIMESTAMP, or GET_MAX_OFFSET for -1), and, when
forced or when it lies behind, set with UPDATE_CONSUMER_OFFSET (one `RollbackStats` per queue).
`reset_queue_offset` sets one queue of one broker (mqadmin's -b/-q/-o), and
`clone_group_offset` sends CLONE_GROUP_OFFSET to every broker set of the topic.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.errors import MQBrokerError, NotFound
from rocketrio.protocol.bodies import MessageQueue, OffsetWrapper, ResetOffsetBody
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import CloneGroupOffsetRequestHeader, ResetOffsetRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_ext

SKIP_ACCUMULATED = -1  # the timestamp meaning "each queue's max offset"
CPP = "CPP"  # the request language that makes the broker send ResetOffsetBodyForC


@attrs.define
class QueueReset:
    """One queue moved by a broker that told the online members (mqadmin's table row)."""

    brokerName: str
    queueId: int
    offset: int


@attrs.define
class RollbackStats:
    """One queue reset the old way, with no member online (upstream admin.RollbackStats)."""

    brokerName: str
    queueId: int
    brokerOffset: int
    consumerOffset: int
    timestampOffset: int
    rollbackOffset: int


@attrs.define
class ResetResult:
    """What a reset did: per queue the new offsets the brokers pushed to online members
    (``offsets``), and the queues of brokers without an online member, set from the admin
    (``rollback``)."""

    group: str
    topic: str
    timestamp: int
    force: bool
    offsets: list[QueueReset] = attrs.field(factory=list)
    rollback: list[RollbackStats] = attrs.field(factory=list)


async def invoke_broker_to_reset_offset(
    admin: MQAdmin,
    addr: str,
    h: ResetOffsetRequestHeader,
    *,
    for_c: bool = False,
) -> dict[MessageQueue, int]:
    """INVOKE_BROKER_TO_RESET_OFFSET (222) at one broker; MQBrokerError on a refusal."""
    cmd = RemotingCommand(code=RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext_fields=to_ext(h))
    if for_c:
        cmd = attrs.evolve(cmd, language=CPP)
    resp = await admin.remoting.invoke(addr, cmd, admin.api.timeout_s)
    if resp.code != ResponseCode.SUCCESS:
        raise MQBrokerError(resp.code, resp.remark, addr)
    return from_json(ResetOffsetBody, resp.body).offsetTable if resp.body else {}


async def _topic_masters(admin: MQAdmin, topic: str) -> list[tuple[str, str, int]]:
    """(brokerName, master address, readQueueNums) of each broker set of the topic's route."""
    route = await admin.topic_route(topic)
    queues = {qd.brokerName: qd.readQueueNums for qd in route.queueDatas}
    out = []
    for bd in sorted(route.brokerDatas, key=lambda b: b.brokerName):
        addr = bd.select_broker_addr()
        if addr is not None:
            out.append((bd.brokerName, addr, queues.get(bd.brokerName, 0)))
    return out


async def reset_offset_by_timestamp(
    admin: MQAdmin,
    group: str,
    topic: str,
    timestamp: int,
    force: bool = True,
    *,
    for_c: bool = False,
) -> ResetResult:
    """Move ``group``'s offsets on ``topic`` to ``timestamp`` (-1: skip what accumulated) on
    every broker set; a broker with no online member falls back to the old way."""
    result = ResetResult(group, topic, timestamp, force)
    h = ResetOffsetRequestHeader(topic, group, timestamp, force)
    for name, addr, read_queues in await _topic_masters(admin, topic):
        try:
            table = await invoke_broker_to_reset_offset(admin, addr, h, for_c=for_c)
        except MQBrokerError as e:
            if e.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            result.rollback += await reset_offset_old(
                admin, addr, name, read_queues, group, topic, timestamp, force
            )
            continue
        result.offsets += [QueueReset(mq.brokerName, mq.queueId, o) for mq, o in table.items()]
    result.offsets.sort(key=lambda q: (q.brokerName, q.queueId))
    result.rollback.sort(key=lambda r: (r.brokerName, r.queueId))
    return result


async def reset_offset_old(
    admin: MQAdmin,
    addr: str,
    broker_name: str,
    read_queues: int,
    group: str,
    topic: str,
    timestamp: int,
    force: bool,
) -> list[RollbackStats]:
    """upstream resetOffsetByTimestampOld at one broker: set the offsets from here."""
    stats = await admin.consume_stats(addr, group, topic)
    progress = {mq: w for mq, w in stats.offsetTable.items() if mq.topic == topic}
    if not progress:  # nothing consumed yet: start from the queues' own ranges
        table = await admin.topic_stats(addr, topic)
        for qid in range(read_queues):
            mq = MessageQueue(topic, broker_name, qid)
            o = table.offsetTable.get(mq)
            if o is not None:
                progress[mq] = OffsetWrapper(brokerOffset=o.maxOffset, consumerOffset=o.minOffset)
    out = []
    for mq, w in sorted(progress.items(), key=lambda e: e[0].queueId):
        if timestamp == SKIP_ACCUMULATED:
            found = await admin.api.get_max_offset(addr, mq)
        else:
            found = await admin.api.search_offset(addr, mq, timestamp)
        rollback = w.consumerOffset
        if force or found <= w.consumerOffset:
            rollback = found
            await admin.api.update_consumer_offset(addr, group, mq, found)
        out.append(
            RollbackStats(
                mq.brokerName, mq.queueId, w.brokerOffset, w.consumerOffset, found, rollback
            )
        )
    return out


async def reset_queue_offset(
    admin: MQAdmin,
    addr: str,
    group: str,
    topic: str,
    queue_id: int,
    offset: int | None,
    timestamp: int,
) -> QueueReset:
    """upstream resetOffsetByQueueId: one queue of the master at ``addr`` to ``offset`` (None:
    the offset found for ``timestamp``). The offset is committed, then the broker tells the
    online members (no member online is fine: the commit already moved it)."""
    brokers = await _topic_masters(admin, topic)
    name = next((n for n, a, _ in brokers if a == addr), None)
    if name is None:
        known = ", ".join(a for _, a, _ in brokers) or "none"
        raise NotFound(f"broker {addr} is not a master of topic {topic} (its masters: {known})")
    mq = MessageQueue(topic, name, queue_id)
    if offset is None:
        offset = await admin.api.search_offset(addr, mq, timestamp)
    await admin.api.update_consumer_offset(addr, group, mq, offset)
    h = ResetOffsetRequestHeader(topic, group, timestamp, True, queueId=queue_id, offset=offset)
    try:
        await invoke_broker_to_reset_offset(admin, addr, h)
    except MQBrokerError as e:
        if e.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
    return QueueReset(name, queue_id, offset)


async def clone_group_offset(
    admin: MQAdmin, src_group: str, dest_group: str, topic: str, offline: bool = False
) -> list[QueueReset]:
    """CLONE_GROUP_OFFSET on every broker set of ``topic``; returns destGroup's committed
    offsets on the topic afterwards."""
    h = CloneGroupOffsetRequestHeader(src_group, dest_group, topic, offline)
    out: list[QueueReset] = []
    for _, addr, _ in await _topic_masters(admin, topic):
        await admin.api.call(addr, RequestCode.CLONE_GROUP_OFFSET, h)
        stats = await admin.consume_stats(addr, dest_group, topic)
        out += [
            QueueReset(mq.brokerName, mq.queueId, w.consumerOffset)
            for mq, w in stats.offsetTable.items()
        ]
    out.sort(key=lambda q: (q.brokerName, q.queueId))
    return out
