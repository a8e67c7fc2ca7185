"""Static topics from the admin side (upstream MQAdminUtils and the update/remapping commands).

The admin computes every mapping; brokers only check and store theirs. As upstream:

1. `examine_topic_config_all`: GET_TOPIC_CONFIG with ``lo=true`` on the master of every broker
   set the name server knows; TOPIC_NOT_EXIST means "not there". A mapping naming another
   broker than the one that answered is an error (a copied file).
2. compute the plan with `protocol.static_topic_alloc` (create / grow, or remap), epochs from
   the injected clock;
3. `complete_no_target_brokers`: the other broker sets of the same clusters get an empty
   mapping of the new epoch (they learn the total);
4. send UPDATE_AND_CREATE_STATIC_TOPIC (513) to each broker: the CreateTopicRequestHeader of
   its topic config and its `TopicQueueMappingDetail` as the body.

`update_static_topic` sends to every broker of the plan. `remapping_static_topic` (there is no
remapping request code: the plan goes out with 513) sends in upstream's order: (1) the map-in
brokers, which may then be written without a logic offset; (2) the map-out brokers, which stops
their writes (they are no longer leaders); (3) reads the blocked old leaders' max offsets
(GET_TOPIC_STATS_INFO) and decides the new leaders' logic offsets (`decide_logic_offsets`);
(4) the map-in brokers again, with the offsets; (5) the other brokers. Offsets and other
overwritten data are not moved: readers use Double-Check-Read (the later broker-side session).

`topic_status_with_logic`: topicStatus rows of the physical queues and, for a static topic,
of its logic queues (brokerName ``__syslo__global__``), as upstream's examineTopicStats.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from rocketrio.actors.client.admin import MQAdmin, QueueStatus, broker_names_of
from rocketrio.actors.client.config import DEFAULT_TOPIC, MASTER_ID
from rocketrio.actors.client.errors import MQBrokerError, MQClientError, UsageError
from rocketrio.actors.client.static_topic_mixed import refuse_mixed_cluster
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import ClusterInfo, MessageQueue
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import CreateTopicRequestHeader, GetTopicConfigRequestHeader
from rocketrio.protocol.serde import from_json
from rocketrio.protocol.static_topic import (
    LogicQueueOffsets,
    MappingError,
    TopicConfigAndQueueMapping,
    TopicQueueMappingDetail,
    build_mapping_ones,
    check_name_epoch_num,
    logic_queue_offsets,
    mock_broker_name,
)
from rocketrio.protocol.static_topic_alloc import (
    DEFAULT_BLOCK_SEQ_SIZE,
    TYPE_CREATE_OR_UPDATE,
    TYPE_REMAPPING,
    TopicRemappingDetailWrapper,
    create_static_topic,
    decide_logic_offsets,
    remap_static_topic,
)

Configs = dict[str, TopicConfigAndQueueMapping]
# sees (the mapping before, the computed plan) before anything is sent
Review = Callable[[TopicRemappingDetailWrapper, TopicRemappingDetailWrapper], None]


@attrs.frozen
class MappingRow:
    """One generation of one logic queue, as the commands print it."""

    globalId: int
    gen: int
    bname: str
    queueId: int
    logicOffset: int
    endOffset: int
    leader: bool


@attrs.frozen
class StaticTopicResult:
    """What a command did: the plan's epoch and total, the brokers written (in order), the
    map-in / map-out brokers of a remapping and every logic queue's generations."""

    topic: str
    type: str
    epoch: int
    totalQueues: int
    writtenTo: list[str]
    mapIn: list[str]
    mapOut: list[str]
    mapping: list[MappingRow]


def master_addrs(info: ClusterInfo) -> dict[str, str]:
    return {
        name: bd.brokerAddrs[MASTER_ID]
        for name, bd in info.brokerAddrTable.items()
        if MASTER_ID in bd.brokerAddrs
    }


def target_brokers(info: ClusterInfo, clusters: str | None, brokers: str | None) -> set[str]:
    """mqadmin's -c (comma-separated clusters) or -b (comma-separated broker names)."""
    if (clusters is None) == (brokers is None):
        raise UsageError("give exactly one of -c clusters or -b brokers")
    if brokers is not None:
        targets = {b.strip() for b in brokers.split(",") if b.strip()}
    else:
        assert clusters is not None
        targets = {
            b for c in clusters.split(",") if c.strip() for b in broker_names_of(info, c.strip())
        }
    if not targets:
        raise UsageError("no broker given")
    masters = master_addrs(info)
    missing = sorted(targets - set(masters))
    if missing:
        raise MQClientError(f"brokers {missing} have no live master known to the name server")
    return targets


async def examine_topic_config_all(admin: MQAdmin, topic: str, info: ClusterInfo) -> Configs:
    out: Configs = {}
    for broker, addr in sorted(master_addrs(info).items()):
        resp = await admin.api.call(
            addr,
            RequestCode.GET_TOPIC_CONFIG,
            GetTopicConfigRequestHeader(topic, lo=True),
            ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST),
        )
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            continue
        cfg = from_json(TopicConfigAndQueueMapping, resp.body)
        if cfg.mappingDetail is not None and cfg.mappingDetail.bname != broker:
            raise MQClientError(
                f"broker {broker} ({addr}) holds a mapping of {topic} that names broker "
                f"{cfg.mappingDetail.bname}: a copied topicQueueMapping.json?"
            )
        out[broker] = cfg
    return out


def complete_no_target_brokers(configs: Configs, info: ClusterInfo, topic: str) -> None:
    """Every other broker set of the clusters involved gets an empty mapping of the plan's
    epoch and total (upstream completeNoTargetBrokers)."""
    any_detail = next(c.mappingDetail for c in configs.values() if c.mappingDetail is not None)
    clusters = [set(names) for names in info.clusterAddrTable.values()]
    for broker in sorted({b for names in clusters if names & set(configs) for b in names}):
        if broker not in configs:
            detail = TopicQueueMappingDetail(
                topic, totalQueues=any_detail.totalQueues, bname=broker, epoch=any_detail.epoch
            )
            configs[broker] = TopicConfigAndQueueMapping(
                topic, readQueueNums=0, writeQueueNums=0, mappingDetail=detail
            )


async def send_mapping(
    admin: MQAdmin, addr: str, cfg: TopicConfigAndQueueMapping, force: bool = False
) -> None:
    assert cfg.mappingDetail is not None
    header = CreateTopicRequestHeader(
        topic=cfg.topicName,
        defaultTopic=DEFAULT_TOPIC,
        readQueueNums=cfg.readQueueNums,
        writeQueueNums=cfg.writeQueueNums,
        perm=cfg.perm,
        topicFilterType=cfg.topicFilterType,
        topicSysFlag=cfg.topicSysFlag,
        order=cfg.order,
        force=force,
    )
    body = fastjson.encode(cfg.mappingDetail)
    await admin.api.call(addr, RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC, header, body)


def _result(plan: TopicRemappingDetailWrapper, written: list[str]) -> StaticTopicResult:
    details = [c.mappingDetail for c in plan.brokerConfigMap.values() if c.mappingDetail]
    ones = build_mapping_ones(details, replace=False, check_complete=True)
    rows = [
        MappingRow(gid, i.gen, i.bname, i.queueId, i.logicOffset, i.endOffset, i is one.items[-1])
        for gid, one in sorted(ones.items())
        for i in one.items
    ]
    total = details[0].totalQueues if details else 0
    return StaticTopicResult(
        plan.topic,
        plan.type,
        plan.epoch,
        total,
        written,
        sorted(plan.brokerToMapIn),
        sorted(plan.brokerToMapOut),
        rows,
    )


async def update_static_topic(
    admin: MQAdmin,
    topic: str,
    queue_num: int,
    *,
    clusters: str | None = None,
    brokers: str | None = None,
    now_ms: Callable[[], int] = wallclock_ms,
    force: bool = False,
    review: Review | None = None,
) -> StaticTopicResult:
    """Create the static topic with ``queue_num`` logic queues, or grow it to that many.
    ``review(before, after)`` sees the mapping before and the computed plan before it is
    sent (mqadmin writes both to files); ``force``: upstream's -fr."""
    if queue_num <= 0:
        raise UsageError(f"-qn must be positive, got {queue_num}")
    info = await admin.cluster_info()
    targets = target_brokers(info, clusters, brokers)
    existing = await examine_topic_config_all(admin, topic, info)
    targets |= set(existing)  # upstream: the brokers already holding it stay targets
    try:
        plan = create_static_topic(topic, queue_num, targets, existing, now_ms())
    except MappingError as e:
        raise MQClientError(f"updateStaticTopic {topic}: {e}") from None
    if review is not None:
        review(_before(topic, TYPE_CREATE_OR_UPDATE, existing, now_ms()), plan)
    return await send_update(admin, plan, info, force)


def _before(topic: str, kind: str, existing: Configs, now: int) -> TopicRemappingDetailWrapper:
    """The mapping as the brokers hold it, as a plan (upstream's ``.before`` file)."""
    found = check_name_epoch_num(topic, existing) if existing else None
    return TopicRemappingDetailWrapper(topic, kind, found[0] if found else now, dict(existing))


async def send_update(
    admin: MQAdmin, plan: TopicRemappingDetailWrapper, info: ClusterInfo, force: bool = False
) -> StaticTopicResult:
    """Send every broker of a create/update plan its mapping (``force``: replace what it
    holds even with an older epoch, upstream's -fr)."""
    complete_no_target_brokers(plan.brokerConfigMap, info, plan.topic)
    masters = master_addrs(info)
    await refuse_mixed_cluster(admin, plan.topic, plan.brokerConfigMap, masters)
    written = []
    for broker, cfg in sorted(plan.brokerConfigMap.items()):
        await send_mapping(admin, masters[broker], cfg, force)
        written.append(broker)
    return _result(plan, written)


async def _old_leader_max_offsets(
    admin: MQAdmin, topic: str, plan: TopicRemappingDetailWrapper, masters: dict[str, str]
) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for broker in sorted(plan.brokerToMapOut):
        stats = await admin.topic_stats(masters[broker], topic)
        for mq, offset in stats.offsetTable.items():
            out[(mq.brokerName, mq.queueId)] = offset.maxOffset
    return out


async def remapping_static_topic(
    admin: MQAdmin,
    topic: str,
    *,
    clusters: str | None = None,
    brokers: str | None = None,
    now_ms: Callable[[], int] = wallclock_ms,
    block_seq_size: int = DEFAULT_BLOCK_SEQ_SIZE,
    force: bool = False,
    review: Review | None = None,
) -> StaticTopicResult:
    """Move the logic queues' leaders onto the target brokers (upstream's five steps);
    ``review`` and ``force`` as for `update_static_topic`."""
    info = await admin.cluster_info()
    targets = target_brokers(info, clusters, brokers)
    existing = await examine_topic_config_all(admin, topic, info)
    if not existing:
        raise MQClientError(f"no broker holds topic {topic}: nothing to remap")
    try:
        plan = remap_static_topic(topic, existing, targets, now_ms())
    except MappingError as e:
        raise MQClientError(f"remappingStaticTopic {topic}: {e}") from None
    if review is not None:
        review(_before(topic, TYPE_REMAPPING, existing, now_ms()), plan)
    return await send_remapping(admin, plan, info, block_seq_size, force)


async def send_remapping(
    admin: MQAdmin,
    plan: TopicRemappingDetailWrapper,
    info: ClusterInfo,
    block_seq_size: int = DEFAULT_BLOCK_SEQ_SIZE,
    force: bool = False,
) -> StaticTopicResult:
    """Send a remapping plan in upstream's five steps (``force``: upstream's -fr)."""
    topic = plan.topic
    complete_no_target_brokers(plan.brokerConfigMap, info, topic)
    masters = master_addrs(info)
    await refuse_mixed_cluster(admin, topic, plan.brokerConfigMap, masters)
    written: list[str] = []

    async def send(broker: str, p: TopicRemappingDetailWrapper) -> None:
        await send_mapping(admin, masters[broker], p.brokerConfigMap[broker], force)
        written.append(broker)

    for broker in sorted(plan.brokerToMapIn):  # 1: new leaders writable, offsets undecided
        await send(broker, plan)
    for broker in sorted(plan.brokerToMapOut):  # 2: old leaders blocked
        await send(broker, plan)
    maxes = await _old_leader_max_offsets(admin, topic, plan, masters)  # 3: decide
    try:
        plan = decide_logic_offsets(plan, maxes, block_seq_size)
    except MappingError as e:
        raise MQClientError(f"remappingStaticTopic {topic}: {e}") from None
    for broker in sorted(plan.brokerToMapIn):  # 4: new leaders with their logic offsets
        await send(broker, plan)
    # 4b (not upstream's): the old leaders learn the decided offsets and their sealed end too,
    # so every copy of a logic queue's list agrees
    for broker in sorted(plan.brokerToMapOut - plan.brokerToMapIn):
        await send(broker, plan)
    for broker in sorted(plan.brokerConfigMap):  # 5: everyone else
        if broker not in plan.brokerToMapIn and broker not in plan.brokerToMapOut:
            await send(broker, plan)
    return _result(plan, written)


async def static_topic_logic_status(
    admin: MQAdmin, topic: str, physical: dict[MessageQueue, tuple[int, int, int]]
) -> list[tuple[MessageQueue, LogicQueueOffsets]]:
    """The logic queues of ``topic`` (empty when it is not static), given the physical
    queues' (min, max, last store time); each keyed by its route MessageQueue."""
    info = await admin.cluster_info()
    try:
        configs = await examine_topic_config_all(admin, topic, info)
    except MQBrokerError:
        return []
    details = [c.mappingDetail for c in configs.values() if c.mappingDetail is not None]
    if not details:
        return []
    ones = build_mapping_ones(details, replace=True, check_complete=False)
    figures = {(mq.brokerName, mq.queueId): v for mq, v in physical.items()}
    scope = details[0].scope
    return [
        (MessageQueue(topic, mock_broker_name(scope), o.globalId), o)
        for o in logic_queue_offsets(ones, figures)
    ]


async def topic_status_with_logic(admin: MQAdmin, topic: str) -> list[QueueStatus]:
    """topicStatus: the physical queues, then a static topic's logic queues."""
    physical = await admin.topic_status(topic)
    figures = {
        MessageQueue(topic, q.brokerName, q.queueId): (
            q.minOffset,
            q.maxOffset,
            q.lastUpdateTimestamp,
        )
        for q in physical
    }
    logic = await static_topic_logic_status(admin, topic, figures)
    return physical + [
        QueueStatus(mq.brokerName, mq.queueId, o.minOffset, o.maxOffset, o.lastUpdateTimestamp)
        for mq, o in logic
    ]
