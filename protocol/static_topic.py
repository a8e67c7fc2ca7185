"""Static topics (RIP-21): the queue-mapping data, offset translation and consistency checks.

A static topic has a fixed number of *logic* queues; each logic queue is a chain of *physical*
queues (one per generation) on one or more brokers. The source of truth is, per broker, a
`TopicQueueMappingDetail`: ``hostedQueues`` maps a logic queue id to its list of
`LogicQueueMappingItem` (oldest generation first, the last one is the leader, the only
writable one). Field names, types and JSON shapes are upstream's (remoting
``protocol/statictopic``); ``fastjson.encode`` writes them in fastjson's alphabetical order with
bare numeric map keys, ``serde.from_json`` reads both that and standard JSON.

This module owns, with no I/O:

- the data classes (`LogicQueueMappingItem`, `TopicQueueMappingDetail`,
  `TopicConfigAndQueueMapping`, the file wrapper `TopicQueueMappingSerializeWrapper`);
- offset translation for one logic queue's item list: `find_item` (upstream
  findLogicQueueMappingItem), `logic_to_physical` and `physical_to_logic`, strict: a logic
  offset maps to at most one physical position and back (holes between generations left by
  the block-sequence round-up map to nothing);
- the checks (`MappingError` with a remark a person can act on): item offsets
  (checkLogicQueueMappingItemOffset), immutability of old items against a newer detail
  (makeSureLogicQueueMappingItemImmutable), no physical queue reused
  (checkIfReusePhysicalQueue), a complete set over brokers (checkAndBuildMappingItems), name /
  epoch / total consistency across brokers (checkNameEpochNumConsistence);
- topicStatus of the logic queues (`logic_queue_offsets`, upstream convertPhysicalTopicStats);
- epochs: Java longs compared as Python ints. Upstream sorted details with
  ``(int)(o2.epoch - o1.epoch)``, which wraps for differences beyond 2**31 and picked a stale
  mapping (apache/rocketmq #10580, #10849); here epochs are compared directly and a wire epoch
  outside the Java long range is refused (`check_epoch`).

Allocation, remapping and generation cleanup live in `static_topic_alloc`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from rocketrio.protocol.bodies import (
    DataVersion,
    MessageQueue,
    TopicConfig,
    TopicConfigAndMappingSerializeWrapper,
    TopicQueueMappingInfo,
)

METADATA_SCOPE_GLOBAL = "__global__"  # upstream MixAll.METADATA_SCOPE_GLOBAL
LOGICAL_QUEUE_MOCK_BROKER_PREFIX = "__syslo__"  # upstream MixAll.LOGICAL_QUEUE_MOCK_BROKER_PREFIX
# upstream MixAll.LOGICAL_QUEUE_MOCK_BROKER_NAME_NOT_EXIST: the "broker" of a logic queue
# nobody leads (a hole); it has no address, so a send or pull to it fails cleanly
LOGICAL_QUEUE_MOCK_BROKER_NAME_NOT_EXIST = "__syslo__none__"
JAVA_LONG_MIN = -(2**63)
JAVA_LONG_MAX = 2**63 - 1


class MappingError(ValueError):
    """A mapping that breaks a static-topic rule; the message says which and where."""


@attrs.frozen
class LogicQueueMappingItem:
    """One generation of a logic queue: physical queue ``bname``/``queueId`` holding logic
    offsets from ``logicOffset`` (-1: not decided yet, a new leader during a remapping).
    ``endOffset`` is the physical end, excluded (-1: open, the leader)."""

    gen: int = 0
    queueId: int = 0
    bname: str = ""
    logicOffset: int = 0
    startOffset: int = 0
    endOffset: int = -1
    timeOfStart: int = -1
    timeOfEnd: int = -1

    def logic_decided(self) -> bool:
        return self.logicOffset >= 0

    def end_decided(self) -> bool:
        return self.endOffset > self.startOffset

    def max_static_offset(self) -> int:
        """Upstream computeMaxStaticQueueOffset: the logic offset just past a sealed item."""
        if self.endOffset >= self.startOffset:
            return self.logicOffset + self.endOffset - self.startOffset
        return self.logicOffset

    def static_offset_loosely(self, physical_offset: int) -> int:
        """Upstream computeStaticQueueOffsetLoosely: clamped to the item's range, -1 while
        the logic offset is undecided."""
        if self.logicOffset < 0:
            return -1
        if physical_offset < self.startOffset:
            return self.logicOffset
        if self.startOffset <= self.endOffset < physical_offset:
            return self.logicOffset + self.endOffset - self.startOffset
        return self.logicOffset + physical_offset - self.startOffset

    def static_offset_strictly(self, physical_offset: int) -> int:
        """Upstream computeStaticQueueOffsetStrictly (a decided item only)."""
        if physical_offset < self.startOffset:
            return self.logicOffset
        return self.logicOffset + physical_offset - self.startOffset

    def offset_delta(self) -> int:
        """What a pull adds to a physical offset to get the logic one (OffsetDelta)."""
        return self.logicOffset - self.startOffset


Items = list[LogicQueueMappingItem]


@attrs.define
class TopicQueueMappingDetail:
    """One broker's mapping of one static topic (upstream TopicQueueMappingDetail, which
    extends TopicQueueMappingInfo). ``bname`` names the broker the data belongs to: a copy on
    another broker is recognised by it. ``currIdMap`` (logic id -> physical id of the queues
    led here) is what registration carries; ``hostedQueues`` stays on the broker."""

    topic: str
    scope: str = METADATA_SCOPE_GLOBAL
    totalQueues: int = 0
    bname: str = ""
    epoch: int = 0
    dirty: bool = False
    currIdMap: dict[int, int] = attrs.field(factory=dict)
    hostedQueues: dict[int, Items] = attrs.field(factory=dict)

    def copy(self) -> TopicQueueMappingDetail:
        """A copy whose maps and lists can be changed without touching this one."""
        return attrs.evolve(
            self,
            currIdMap=dict(self.currIdMap),
            hostedQueues={k: list(v) for k, v in self.hostedQueues.items()},
        )

    def leader_id_map(self) -> dict[int, int]:
        """Upstream buildIdMap(LEVEL_0): logic id -> physical queue id led by this broker."""
        return {
            gid: items[-1].queueId
            for gid, items in sorted(self.hostedQueues.items())
            if items and items[-1].bname == self.bname
        }

    def released_by(self, new: TopicQueueMappingDetail | None) -> dict[int, int]:
        """Logic id -> physical queue id of the logic queues this detail leads and ``new`` (the
        same broker's next detail of the topic; None: the topic removed) does not: a
        remapping moved them away, and nothing will arrive at those physical queues again."""
        now = {} if new is None else new.leader_id_map()
        return {gid: q for gid, q in self.leader_id_map().items() if gid not in now}

    def to_info(self) -> TopicQueueMappingInfo:
        """What registration carries (upstream TopicQueueMappingDetail.cloneAsMappingInfo):
        the logic queues led here, never the item lists."""
        return TopicQueueMappingInfo(
            self.topic,
            self.scope,
            self.totalQueues,
            self.bname,
            self.epoch,
            self.dirty,
            self.leader_id_map(),
        )

    def is_leader(self, global_id: int) -> bool:
        items = self.hostedQueues.get(global_id)
        return bool(items) and items[-1].bname == self.bname  # type: ignore[index]


@attrs.define
class TopicConfigAndQueueMapping(TopicConfig):
    """GET_TOPIC_CONFIG's answer and the admin's per-broker plan: a topic config plus the
    broker's mapping (None for a topic that is not static, or when ``lo`` was not asked)."""

    mappingDetail: TopicQueueMappingDetail | None = None


@attrs.define
class TopicQueueMappingSerializeWrapper:
    """topicQueueMapping.json: every static topic's mapping on this broker, with a version."""

    topicQueueMappingInfoMap: dict[str, TopicQueueMappingDetail] = attrs.field(factory=dict)
    dataVersion: DataVersion = attrs.field(factory=DataVersion)


@attrs.define
class TopicConfigAndMappingDetailWrapper(TopicConfigAndMappingSerializeWrapper):
    """GET_ALL_TOPIC_CONFIG's answer (upstream TopicConfigAndMappingSerializeWrapper as the
    master serves it to its slaves): the topic table plus every static topic's full mapping
    and the mappings' DataVersion. A master that sends no details parses as an empty map."""

    topicQueueMappingDetailMap: dict[str, TopicQueueMappingDetail] = attrs.field(factory=dict)


@attrs.frozen
class MappingOne:
    """One logic queue as its leader broker sees it (upstream TopicQueueMappingOne)."""

    topic: str
    bname: str
    globalId: int
    items: tuple[LogicQueueMappingItem, ...]
    scope: str = METADATA_SCOPE_GLOBAL


# ---------------------------------------------------------------------------- epochs


def check_epoch(epoch: int, where: str) -> None:
    """An epoch must fit a Java long: it is written by and read into Java tools."""
    if not JAVA_LONG_MIN <= epoch <= JAVA_LONG_MAX:
        raise MappingError(f"epoch {epoch} of {where} does not fit a 64-bit long")


def newest_first(details: Iterable[TopicQueueMappingDetail]) -> list[TopicQueueMappingDetail]:
    """Details by epoch, newest first; a direct comparison (no ``(int)(a - b)`` wrap)."""
    return sorted(details, key=lambda d: d.epoch, reverse=True)


# ---------------------------------------------------------------------------- translation


def find_item(
    items: Items | tuple[LogicQueueMappingItem, ...], logic_offset: int, ignore_negative: bool
) -> LogicQueueMappingItem | None:
    """Upstream findLogicQueueMappingItem: the newest item starting at or before
    ``logic_offset``; when there is none (before the first), the oldest usable item."""
    for item in reversed(items):
        if ignore_negative and item.logicOffset < 0:
            continue
        if logic_offset >= item.logicOffset:
            return item
    for item in items:
        if not (ignore_negative and item.logicOffset < 0):
            return item
    return None


@attrs.frozen
class PhysicalPosition:
    """Where a logic offset lives: physical queue ``bname``/``queueId`` at ``offset``."""

    bname: str
    queueId: int
    offset: int


def _logic_end(item: LogicQueueMappingItem, nxt: LogicQueueMappingItem | None) -> int | None:
    """The first logic offset past ``item`` (None: open, the decided leader)."""
    if item.end_decided():
        return item.max_static_offset()
    if nxt is not None and nxt.logic_decided():
        return nxt.logicOffset
    return None


def logic_to_physical(items: Items, logic_offset: int) -> PhysicalPosition | None:
    """The one physical position of ``logic_offset``, None when no generation holds it
    (before the first item, in a hole between generations, or past a sealed last item).
    physical = logic - item.logicOffset + item.startOffset."""
    item = find_item(items, logic_offset, ignore_negative=True)
    if item is None or logic_offset < item.logicOffset:
        return None
    i = items.index(item)
    nxt = next((x for x in items[i + 1 :] if x.logic_decided()), None)
    end = _logic_end(item, nxt)
    if end is not None and logic_offset >= end:
        return None
    return PhysicalPosition(item.bname, item.queueId, logic_offset - item.offset_delta())


def physical_to_logic(items: Items, bname: str, queue_id: int, physical_offset: int) -> int | None:
    """The logic offset of a physical position, None when the position is outside the
    generation's range or the generation's logic offset is not decided yet."""
    for i, item in enumerate(items):
        if item.bname != bname or item.queueId != queue_id:
            continue
        if not item.logic_decided() or physical_offset < item.startOffset:
            return None
        if item.end_decided() and physical_offset >= item.endOffset:
            return None
        logic = physical_offset + item.offset_delta()
        nxt = next((x for x in items[i + 1 :] if x.logic_decided()), None)
        if nxt is not None and logic >= nxt.logicOffset:
            return None
        return logic
    return None


# ---------------------------------------------------------------------------- checks


def check_item_offsets(items: Items | tuple[LogicQueueMappingItem, ...]) -> None:
    """Upstream checkLogicQueueMappingItemOffset: no negative ids, gens strictly increasing,
    only the leader may have an undecided logic offset, logic ranges strictly increasing."""
    last_gen = -1
    last_offset = -1
    n = len(items)
    for i in range(n - 1, -1, -1):
        item = items[i]
        if item.startOffset < 0 or item.gen < 0 or item.queueId < 0:
            raise MappingError(f"{item}: startOffset, gen and queueId must not be negative")
        if n >= 2 and i <= n - 2 and item.logicOffset < 0:
            raise MappingError(f"{item}: only the newest item may have an undecided logicOffset")
        if last_gen != -1 and item.gen >= last_gen:
            raise MappingError(f"{item}: generations must increase from old to new")
        if item.endOffset != -1 and item.endOffset < item.startOffset:
            raise MappingError(f"{item}: endOffset is smaller than startOffset")
        if last_offset != -1 and item.logicOffset != -1:
            if item.logicOffset >= last_offset:
                raise MappingError(f"{item}: logicOffset must increase from old to new")
            if item.max_static_offset() >= last_offset:
                raise MappingError(f"{item}: its logic range overlaps the next generation")
        last_gen = item.gen
        last_offset = item.logicOffset


def check_immutable(old: Items, new: Items, epoch_equal: bool) -> None:
    """Upstream makeSureLogicQueueMappingItemImmutable: an item of a generation both lists
    hold keeps its physical queue and start, and a decided logic offset never changes. With
    an equal epoch the leader must be the same too."""
    if not old:
        return
    if not new:
        raise MappingError("the new item list is empty")
    io = inew = 0
    while io < len(old) and inew < len(new):
        o, n = old[io], new[inew]
        if n.gen < o.gen:
            inew += 1
        elif o.gen < n.gen:
            io += 1
        else:
            if (o.bname, o.queueId, o.startOffset) != (n.bname, n.queueId, n.startOffset):
                raise MappingError(f"generation {o.gen} changed its physical queue: {o} -> {n}")
            if o.logicOffset != -1 and o.logicOffset != n.logicOffset:
                raise MappingError(f"generation {o.gen} changed its logicOffset: {o} -> {n}")
            io += 1
            inew += 1
    if epoch_equal:
        a, b = old[-1], new[-1]
        if (a.gen, a.bname, a.queueId, a.startOffset) != (b.gen, b.bname, b.queueId, b.startOffset):
            raise MappingError("the leader changed but the epoch did not")


def check_no_reused_physical_queue(ones: Iterable[MappingOne]) -> None:
    """Upstream checkIfReusePhysicalQueue: a physical queue belongs to one logic queue."""
    seen: dict[tuple[str, int], int] = {}
    for one in ones:
        for item in one.items:
            key = (item.bname, item.queueId)
            other = seen.setdefault(key, one.globalId)
            if other != one.globalId:
                raise MappingError(
                    f"topic {one.topic}: logic queues {one.globalId} and {other} share the "
                    f"physical queue {item.bname}-{item.queueId}"
                )


def build_mapping_ones(
    details: Iterable[TopicQueueMappingDetail], *, replace: bool, check_complete: bool
) -> dict[int, MappingOne]:
    """Upstream checkAndBuildMappingItems: each logic queue from its leader's detail (newest
    epoch first). ``check_complete``: logic queues 0..totalQueues-1 all led by someone."""
    max_num = 0
    ones: dict[int, MappingOne] = {}
    for d in newest_first(details):
        check_epoch(d.epoch, f"broker {d.bname}")
        max_num = max(max_num, d.totalQueues)
        for gid, items in sorted(d.hostedQueues.items()):
            check_item_offsets(items)
            if not items or items[-1].bname != d.bname:
                continue  # not the leader here
            if gid in ones:
                if not replace:
                    raise MappingError(
                        f"logic queue {gid} is led by both {ones[gid].bname} and {d.bname}"
                    )
                continue
            ones[gid] = MappingOne(d.topic, d.bname, gid, tuple(items), d.scope)
    if check_complete:
        if max_num != len(ones):
            raise MappingError(
                f"totalQueues is {max_num} but {len(ones)} logic queues have a leader"
            )
        missing = [i for i in range(max_num) if i not in ones]
        if missing:
            raise MappingError(f"logic queues {missing} have no leader")
    check_no_reused_physical_queue(ones.values())
    return ones


def check_name_epoch_num(
    topic: str | None, configs: Mapping[str, TopicConfigAndQueueMapping]
) -> tuple[int, int] | None:
    """Upstream checkNameEpochNumConsistence: every broker's detail names itself, is clean,
    and all agree on topic, scope, epoch and totalQueues. Returns (epoch, totalQueues)."""
    if not configs:
        return None
    epoch: int | None = None
    num: int | None = None
    scope: str | None = None
    for broker, cfg in sorted(configs.items()):
        d = cfg.mappingDetail
        if d is None:
            raise MappingError(f"broker {broker} has topic {cfg.topicName} but no mapping")
        if d.bname != broker:
            raise MappingError(f"the mapping held by broker {broker} names broker {d.bname}")
        if d.dirty:
            raise MappingError(f"the mapping is dirty on broker {broker}")
        if cfg.topicName != d.topic or (topic is not None and d.topic != topic):
            raise MappingError(f"the topic name does not match on broker {broker}")
        check_epoch(d.epoch, f"broker {broker}")
        if scope is not None and scope != d.scope:
            raise MappingError(f"scope {d.scope} != {scope} on broker {broker}")
        if epoch is not None and epoch != d.epoch:
            raise MappingError(f"epoch {d.epoch} != {epoch} on broker {broker}")
        if num is not None and num != d.totalQueues:
            raise MappingError(f"totalQueues {d.totalQueues} != {num} on broker {broker}")
        scope, epoch, num = d.scope, d.epoch, d.totalQueues
    assert epoch is not None and num is not None
    return epoch, num


def check_physical_queues(configs: Mapping[str, TopicConfigAndQueueMapping]) -> None:
    """Upstream checkPhysicalQueueConsistence: physical queues start at 0 and exist in
    their broker's topic config."""
    for broker, cfg in sorted(configs.items()):
        if cfg.readQueueNums < cfg.writeQueueNums:
            raise MappingError(f"broker {broker}: readQueueNums < writeQueueNums")
        assert cfg.mappingDetail is not None
        for items in cfg.mappingDetail.hostedQueues.values():
            for item in items:
                if item.startOffset != 0:
                    raise MappingError(f"{item}: a physical queue must start at offset 0")
                owner = configs.get(item.bname)
                if owner is None:
                    raise MappingError(f"{item}: broker {item.bname} is not in the mapping")
                if item.queueId >= owner.writeQueueNums:
                    raise MappingError(
                        f"{item}: queue {item.queueId} exceeds the {owner.writeQueueNums} "
                        f"write queues of {item.bname}"
                    )


def mock_broker_name(scope: str) -> str:
    """The brokerName logic queues show in routes (upstream getMockBrokerName)."""
    if scope == METADATA_SCOPE_GLOBAL:
        return LOGICAL_QUEUE_MOCK_BROKER_PREFIX + scope[2:]
    return LOGICAL_QUEUE_MOCK_BROKER_PREFIX + scope


def is_logic_broker_name(broker_name: str) -> bool:
    """A MessageQueue's brokerName that names a logic queue, not a broker set."""
    return broker_name.startswith(LOGICAL_QUEUE_MOCK_BROKER_PREFIX)


def logic_queue_endpoints(
    topic: str, mapping_by_broker: Mapping[str, TopicQueueMappingInfo] | None
) -> dict[MessageQueue, str]:
    """A static topic's route as logic queues (upstream ClientMetadata
    topicRouteData2EndpointsForStaticTopic): per scope, logic queue ids 0..totalQueues-1 as
    MessageQueue(topic, mock broker name, id) -> the broker leading it, the newest epoch
    winning when two brokers claim one; a logic queue nobody leads (a hole) points at
    `LOGICAL_QUEUE_MOCK_BROKER_NAME_NOT_EXIST`, so the queue count never changes.
    totalQueues is the largest any info names (a static topic never shrinks)."""
    if not mapping_by_broker:
        return {}
    by_scope: dict[str, list[TopicQueueMappingInfo]] = {}
    for _, info in sorted(mapping_by_broker.items()):
        by_scope.setdefault(info.scope, []).append(info)
    out: dict[MessageQueue, str] = {}
    for scope, infos in sorted(by_scope.items()):
        infos.sort(key=lambda i: i.epoch, reverse=True)  # a direct comparison: no wrap
        total = max(info.totalQueues for info in infos)
        leaders: dict[int, TopicQueueMappingInfo] = {}
        for info in infos:
            for gid in info.currIdMap:
                held = leaders.get(gid)
                if held is None or held.epoch < info.epoch:
                    leaders[gid] = info
        name = mock_broker_name(scope)
        for gid in range(total):
            leader = leaders.get(gid)
            out[MessageQueue(topic, name, gid)] = (
                leader.bname if leader is not None else LOGICAL_QUEUE_MOCK_BROKER_NAME_NOT_EXIST
            )
    return out


@attrs.frozen
class LogicQueueOffsets:
    """topicStatus of one logic queue: min / max logic offsets and the last store time."""

    globalId: int
    minOffset: int
    maxOffset: int
    lastUpdateTimestamp: int


def logic_queue_offsets(
    ones: Mapping[int, MappingOne], physical: Mapping[tuple[str, int], tuple[int, int, int]]
) -> list[LogicQueueOffsets]:
    """Upstream convertPhysicalTopicStats: per logic queue, the min from its oldest decided
    generation and the max from its newest, given each physical queue's (min, max, last
    store time). An older generation whose figures are missing (its broker retired or
    unreachable) is passed over for the min, the next one's start taken instead; a queue
    without figures for its newest generation is left out."""
    out = []
    for gid, one in sorted(ones.items()):
        last = find_item(one.items, JAVA_LONG_MAX, ignore_negative=True)
        if last is None:
            continue
        hi = physical.get((last.bname, last.queueId))
        if hi is None:
            continue
        decided = sorted(
            (it for it in one.items if it.logicOffset >= 0), key=lambda it: it.logicOffset
        )
        first = next(it for it in decided if (it.bname, it.queueId) in physical)
        lo = physical[(first.bname, first.queueId)]
        low = max(first.static_offset_loosely(lo[0]), 0)
        high = max(last.static_offset_strictly(hi[1]), 0)
        out.append(LogicQueueOffsets(gid, low, high, hi[2]))
    return out
