"""Static topics (RIP-21): where logic queues go. Pure: inputs in, a new plan out.

- `MappingAllocator` (upstream TopicQueueMappingUtils.MappingAllocator): gives each new logic
  queue to a broker holding the fewest, so the counts stay balanced. Upstream breaks ties with
  ``Collections.shuffle`` when creating; here ties are broken by broker name, so the same
  inputs always give the same plan (a caller wanting spread may pass a seeded ``rng``). When
  remapping, ties prefer the brokers that led fewer queues before, as upstream, to move less.
- `create_static_topic` (upstream createTopicConfigMapping): new logic queues on the target
  brokers, each a generation-0 item on a new physical queue at logic offset 0; existing ones
  untouched; the queue count may only grow.
- `remap_static_topic` (upstream remappingStaticTopic): a new balanced leader set over the
  target brokers; a moved logic queue gets a new item (gen + 1, a new physical queue on the
  map-in broker, logicOffset -1 until decided) written to both the map-in and the map-out
  broker. A broker either maps queues in or out, never both. Old items are never changed.
- `decide_logic_offsets` (the third step of upstream MQAdminUtils.remappingStaticTopic): once
  the old leaders are blocked, each undecided new leader starts at the old leader's end
  rounded up by the block sequence (`block_seq_round_up`); the old leader is sealed at its max
  physical offset (``endOffset``), so translation has exact bounds.
- generation cleanup (upstream TopicQueueMappingCleanService): `expired_earliest` drops a
  leader's earliest generation once its physical queue holds nothing; `stale_hosted_queues`
  finds the logic queues a former leader still lists though a newer leader took over from
  the one it knows, so a broker keeps at most the two latest generations it took part in.
  `generations_read_by_all` (S4) drops a leader's generations more than two behind once
  every group has read them; `follow_leader` lets a broker that no longer leads a logic
  queue drop the generations its leader dropped, or its whole list once it is more than one
  generation behind. The broker's periodic task is actors/broker/static_topic/clean.py.

Epochs: ``max(old epoch + 1000, now_ms)``, now injected. Every plan is re-checked with the
checks of `static_topic` before it is returned (upstream's "double check").
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Literal

import attrs

from rocketrio.protocol.static_topic import (
    Items,
    LogicQueueMappingItem,
    MappingError,
    TopicConfigAndQueueMapping,
    TopicQueueMappingDetail,
    build_mapping_ones,
    check_name_epoch_num,
    check_no_reused_physical_queue,
    check_physical_queues,
)

DEFAULT_BLOCK_SEQ_SIZE = 10000
EPOCH_STEP_MS = 1000

TYPE_CREATE_OR_UPDATE = "CREATE_OR_UPDATE"
TYPE_REMAPPING = "REMAPPING"


@attrs.define
class TopicRemappingDetailWrapper:
    """A computed plan (upstream TopicRemappingDetailWrapper): per broker the topic config and
    mapping to send, and, for a remapping, which brokers take queues in and which give out."""

    topic: str
    type: str
    epoch: int
    brokerConfigMap: dict[str, TopicConfigAndQueueMapping] = attrs.field(factory=dict)
    brokerToMapIn: set[str] = attrs.field(factory=set)
    brokerToMapOut: set[str] = attrs.field(factory=set)


class MappingAllocator:
    """Balanced, deterministic placement of logic queues on brokers."""

    def __init__(
        self,
        id_to_broker: Mapping[int, str],
        broker_num: Mapping[str, int],
        before_remapping: Mapping[str, int] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.id_to_broker = dict(id_to_broker)
        self.broker_num = dict(broker_num)
        self.before = dict(before_remapping or {})
        self.rng = rng
        self._least: list[str] = []
        self._index = 0

    def _refresh(self) -> None:
        low = min(self.broker_num.values())
        least = sorted(b for b, n in self.broker_num.items() if n == low)
        if self.before:
            least.sort(key=lambda b: self.before.get(b, 0))  # stable: name breaks ties
        elif self.rng is not None:
            self.rng.shuffle(least)
        self._least = least
        self._index = len(least) - 1

    def _next_broker(self) -> str:
        if not self._least:
            self._refresh()
        return self._least.pop(self._index % len(self._least))

    def up_to_num(self, max_queue_num: int) -> None:
        if not self.broker_num:
            raise MappingError("no target broker to place queues on")
        for i in range(len(self.id_to_broker), max_queue_num):
            broker = self._next_broker()
            self.broker_num[broker] = self.broker_num.get(broker, 0) + 1
            self.id_to_broker[i] = broker


def new_epoch(old_epoch: int, now_ms: int) -> int:
    return max(old_epoch + EPOCH_STEP_MS, now_ms)


def block_seq_round_up(offset: int, block_seq_size: int) -> int:
    """Upstream blockSeqRoundUp: the next block boundary, skipping one more block when the
    offset is in the upper half of its block (room for in-flight writes)."""
    num, left = divmod(offset, block_seq_size)
    return (num + 1) * block_seq_size if left < block_seq_size // 2 else (num + 2) * block_seq_size


def _copy_configs(
    configs: Mapping[str, TopicConfigAndQueueMapping],
) -> dict[str, TopicConfigAndQueueMapping]:
    out = {}
    for broker, cfg in configs.items():
        detail = cfg.mappingDetail.copy() if cfg.mappingDetail is not None else None
        out[broker] = attrs.evolve(cfg, attributes=dict(cfg.attributes), mappingDetail=detail)
    return out


def _double_check(
    topic: str, configs: Mapping[str, TopicConfigAndQueueMapping], targets: set[str] | None
) -> None:
    check_name_epoch_num(topic, configs)
    details = [c.mappingDetail for c in configs.values() if c.mappingDetail is not None]
    ones = build_mapping_ones(details, replace=False, check_complete=True)
    check_physical_queues(configs)
    check_no_reused_physical_queue(ones.values())
    if targets is not None:
        outside = sorted({o.bname for o in ones.values()} - targets)
        if outside:
            raise MappingError(f"brokers {outside} still lead queues but are not targets")


def create_static_topic(
    topic: str,
    queue_num: int,
    targets: set[str],
    existing: Mapping[str, TopicConfigAndQueueMapping],
    now_ms: int,
    rng: random.Random | None = None,
) -> TopicRemappingDetailWrapper:
    """Create the static topic, or grow it to ``queue_num`` logic queues (never shrink)."""
    configs = _copy_configs(existing)
    for broker, cfg in configs.items():
        if (
            cfg.mappingDetail is not None
            and cfg.mappingDetail.hostedQueues
            and broker not in targets
        ):
            raise MappingError(f"broker {broker} holds queues of {topic} but is not a target")
    ones = {}
    old_epoch = now_ms
    if configs:
        epoch_num = check_name_epoch_num(topic, configs)
        assert epoch_num is not None
        old_epoch = epoch_num[0]
        details = [c.mappingDetail for c in configs.values() if c.mappingDetail is not None]
        ones = build_mapping_ones(details, replace=False, check_complete=True)
        check_physical_queues(configs)
    if queue_num < len(ones):
        raise MappingError(
            f"cannot decrease the queues of static topic {topic}: {queue_num} < {len(ones)}"
        )
    if queue_num == len(ones):
        raise MappingError(f"static topic {topic} already has {queue_num} queues, nothing to do")
    broker_num = dict.fromkeys(targets, 0)
    old_id_to_broker = {}
    for gid, one in ones.items():
        old_id_to_broker[gid] = one.bname
        broker_num[one.bname] = broker_num.get(one.bname, 0) + 1
    allocator = MappingAllocator(old_id_to_broker, broker_num, None, rng)
    allocator.up_to_num(queue_num)
    epoch = new_epoch(old_epoch, now_ms) if configs else now_ms
    for gid, broker in sorted(allocator.id_to_broker.items()):
        if gid in ones:
            continue
        cfg = configs.get(broker)
        if cfg is None:
            detail = TopicQueueMappingDetail(topic, totalQueues=0, bname=broker, epoch=epoch)
            cfg = configs[broker] = TopicConfigAndQueueMapping(
                topic, readQueueNums=1, writeQueueNums=1, mappingDetail=detail
            )
        else:
            cfg.writeQueueNums += 1
            cfg.readQueueNums += 1
        assert cfg.mappingDetail is not None
        item = LogicQueueMappingItem(0, cfg.writeQueueNums - 1, broker, 0, 0, -1, -1, -1)
        cfg.mappingDetail.hostedQueues[gid] = [item]
    for cfg in configs.values():
        assert cfg.mappingDetail is not None
        cfg.mappingDetail.epoch = epoch
        cfg.mappingDetail.totalQueues = queue_num
    _double_check(topic, configs, None)
    return TopicRemappingDetailWrapper(topic, TYPE_CREATE_OR_UPDATE, epoch, configs)


def remap_static_topic(
    topic: str,
    existing: Mapping[str, TopicConfigAndQueueMapping],
    targets: set[str],
    now_ms: int,
) -> TopicRemappingDetailWrapper:
    """A new leader set over ``targets``; moved queues get an undecided new generation."""
    if not targets:
        raise MappingError("no target broker given")
    configs = _copy_configs(existing)
    epoch_num = check_name_epoch_num(topic, configs)
    if epoch_num is None:
        raise MappingError(f"no broker holds static topic {topic}: nothing to remap")
    old_epoch, max_num = epoch_num
    details = [c.mappingDetail for c in configs.values() if c.mappingDetail is not None]
    ones = build_mapping_ones(details, replace=False, check_complete=True)
    check_physical_queues(configs)
    before: dict[str, int] = {}
    for one in ones.values():
        before[one.bname] = before.get(one.bname, 0) + 1
    allocator = MappingAllocator({}, dict.fromkeys(targets, 0), before)
    allocator.up_to_num(max_num)
    expected_num = dict(allocator.broker_num)
    waiting: list[int] = []
    expected: dict[int, str] = {}
    # a broker keeps as many of its queues as it should hold, the rest wait for a new home
    for gid, one in sorted(ones.items()):
        if expected_num.get(one.bname, 0) > 0:
            expected[gid] = one.bname
            expected_num[one.bname] -= 1
        else:
            waiting.append(gid)
            expected_num.pop(one.bname, None)
    for broker, n in sorted(expected_num.items()):
        for _ in range(n):
            expected[waiting.pop(0)] = broker
    assert not waiting
    epoch = new_epoch(old_epoch, now_ms)
    map_in: set[str] = set()
    map_out: set[str] = set()
    for gid, broker in sorted(expected.items()):
        one = ones[gid]
        if one.bname == broker:
            continue
        map_in.add(broker)
        map_out.add(one.bname)
        in_cfg = configs.get(broker)
        if in_cfg is None:
            detail = TopicQueueMappingDetail(topic, totalQueues=max_num, bname=broker, epoch=epoch)
            in_cfg = configs[broker] = TopicConfigAndQueueMapping(
                topic, readQueueNums=0, writeQueueNums=0, mappingDetail=detail
            )
        in_cfg.writeQueueNums += 1
        in_cfg.readQueueNums += 1
        last = one.items[-1]
        new_item = LogicQueueMappingItem(
            last.gen + 1, in_cfg.writeQueueNums - 1, broker, -1, 0, -1, -1, -1
        )
        items = [*one.items, new_item]
        assert in_cfg.mappingDetail is not None
        out_detail = configs[one.bname].mappingDetail
        assert out_detail is not None
        in_cfg.mappingDetail.hostedQueues[gid] = list(items)
        out_detail.hostedQueues[gid] = list(items)
    for cfg in configs.values():
        assert cfg.mappingDetail is not None
        cfg.mappingDetail.epoch = epoch
        cfg.mappingDetail.totalQueues = max_num
    _double_check(topic, configs, set(targets))
    return TopicRemappingDetailWrapper(topic, TYPE_REMAPPING, epoch, configs, map_in, map_out)


def decide_logic_offsets(
    plan: TopicRemappingDetailWrapper,
    old_leader_max: Mapping[tuple[str, int], int],
    block_seq_size: int = DEFAULT_BLOCK_SEQ_SIZE,
) -> TopicRemappingDetailWrapper:
    """Step 3 of a remapping, after the old leaders are blocked: ``old_leader_max`` gives the
    max physical offset of each old leader (bname, queueId). Each undecided new leader starts
    at the block-rounded logic end of its old leader, which is sealed there. Items already
    decided are left as they are."""
    configs = _copy_configs(plan.brokerConfigMap)
    for broker in sorted(plan.brokerToMapOut):
        detail = configs[broker].mappingDetail
        assert detail is not None
        for gid, items in sorted(detail.hostedQueues.items()):
            if len(items) < 2 or items[-1].logic_decided():
                continue
            old, new = items[-2], items[-1]
            phys_max = old_leader_max.get((old.bname, old.queueId))
            if phys_max is None:
                raise MappingError(f"no max offset for the old leader {old.bname}-{old.queueId}")
            if phys_max < old.startOffset:
                raise MappingError(f"the max offset {phys_max} of {old} is below its start")
            logic_end = old.static_offset_strictly(phys_max)
            sealed = attrs.evolve(old, endOffset=phys_max)
            decided = attrs.evolve(new, logicOffset=block_seq_round_up(logic_end, block_seq_size))
            updated: Items = [*items[:-2], sealed, decided]
            detail.hostedQueues[gid] = updated
            in_detail = configs[new.bname].mappingDetail
            assert in_detail is not None
            in_detail.hostedQueues[gid] = list(updated)
    _double_check(plan.topic, configs, None)
    return attrs.evolve(plan, brokerConfigMap=configs)


# ---------------------------------------------------------------------------- cleanup


def expired_earliest(items: Items, earliest_min: int, earliest_max: int) -> Items | None:
    """A leader's list without its earliest generation once that physical queue is empty
    (min == max, or max == 0), None when nothing is to drop (upstream cleanItemExpired)."""
    if len(items) <= 1:
        return None
    if earliest_max == earliest_min or earliest_max == 0:
        return items[1:]
    return None


def stale_hosted_queues(
    local: TopicQueueMappingDetail,
    real_leader: Mapping[int, str],
    leader_details: Mapping[str, TopicQueueMappingDetail],
) -> set[int]:
    """Upstream cleanItemListMoreThanSecondGen: the logic queues this broker lists with a
    leader elsewhere, where the route's ``real_leader`` differs from that leader and the real
    leader's own detail (same epoch and total) confirms it leads: more than one generation
    behind, the list can go."""
    out: set[int] = set()
    for gid, items in local.hostedQueues.items():
        if not items or items[-1].bname == local.bname:
            continue
        known_leader = items[-1].bname
        real = real_leader.get(gid)
        remote = leader_details.get(real) if real is not None else None
        if remote is None or remote.bname != real:
            continue
        if remote.totalQueues != local.totalQueues or remote.epoch != local.epoch:
            continue
        remote_items = remote.hostedQueues.get(gid)
        if not remote_items or remote_items[-1].bname != real:
            continue
        if real != known_leader:
            out.add(gid)
    return out


MAX_GENERATIONS_BEHIND = 2  # S4: "mappings older than 2 generations cleaned"


def generations_read_by_all(
    items: Items, positions: Iterable[int], max_behind: int = MAX_GENERATIONS_BEHIND
) -> int | None:
    """S4 on a leader: the first generation to keep once the oldest generations more than
    ``max_behind`` behind the leader are dropped, each only when it is sealed (its logic end is
    known) and every group's logic position (``positions``: the next offset each group will
    read) is at or past that end, so no unread data goes. Oldest first, stopping at the first
    generation kept (the list stays contiguous); never the leader. None: nothing to drop."""
    if len(items) <= 1:
        return None
    positions = list(positions)
    leader_gen = items[-1].gen
    keep_from = 0
    for item in items[:-1]:
        if leader_gen - item.gen <= max_behind:
            break
        if not item.logic_decided() or item.endOffset < item.startOffset:
            break  # not sealed: its end is unknown
        end = item.max_static_offset()
        if any(p < end for p in positions):
            break
        keep_from += 1
    return items[keep_from].gen if keep_from else None


def follow_leader(
    local: TopicQueueMappingDetail, gid: int, leader: TopicQueueMappingDetail | None
) -> int | Literal["drop"] | None:
    """A broker that lists logic queue ``gid`` but does not lead it, against the detail of
    the leader its list names (``leader``, as that broker answers GET_TOPIC_CONFIG lo=true):

    - "drop": that leader's own list says another broker leads now (or it lists the queue no
      more, having dropped it the same way), so this broker is more than one generation
      behind (upstream cleanItemListMoreThanSecondGen; upstream asks the route for the real
      leader, here the leader known says so itself);
    - the first generation to keep: the leader cleaned older generations this list still has;
    - None: nothing to change, or an answer that cannot be trusted (names another broker, has
      another queue count, or an older epoch)."""
    items = local.hostedQueues.get(gid)
    if not items or items[-1].bname == local.bname or leader is None:
        return None
    known = items[-1].bname
    if leader.bname != known or leader.totalQueues != local.totalQueues:
        return None
    if leader.epoch < local.epoch:
        return None
    theirs = leader.hostedQueues.get(gid)
    if not theirs or theirs[-1].bname != known:
        return "drop"  # a leader never drops its own list: it dropped it as a follower
    first = theirs[0].gen
    if items[0].gen >= first or items[-1].gen < first:
        return None
    return first
