"""What one poll of the cluster found: typed records the poller fills and the view reads.

They are also the rows of the page's sections (``attrs.asdict`` of them is what the websocket
carries), so the page and the server agree on field names by construction. Offsets are
CommitLog byte offsets for replicas and ConsumeQueue offsets for topics and groups.
"""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class NamesrvStatus:
    addr: str
    ok: bool
    error: str = ""
    clusters: int = 0
    brokers: int = 0  # live broker addresses registered


@attrs.frozen(kw_only=True)
class ControllerStatus:
    """One controller replica: its own Raft role and term, who it thinks leads, its commit
    index (from CONTROLLER_GET_METADATA_INFO)."""

    addr: str
    ok: bool
    error: str = ""
    selfId: str = ""
    role: str = ""  # leader / follower / candidate
    term: int = 0
    leaderId: str = ""
    leaderAddr: str = ""
    commitIndex: int = 0


@attrs.frozen(kw_only=True)
class ReplicaStatus:
    """One broker of a set, as its own GET_BROKER_RUNTIME_INFO says (``ok`` false: it did not
    answer) plus what the controller says of it (``alive``, ``inSync``)."""

    brokerId: int
    addr: str
    ok: bool
    error: str = ""
    role: str = ""  # ASYNC_MASTER / SYNC_MASTER / SLAVE, as the broker reports itself
    alive: bool = True  # the controller's liveness (True without a controller)
    inSync: bool = False
    maxOffset: int = 0
    confirmOffset: int = -1  # -1: the broker did not say (not in controller mode)
    masterEpoch: int = 0
    putTotal: int = 0  # messages stored today (msgPutTotalTodayNow)
    getTotal: int = 0  # messages pulled today (msgGetTotalTodayNow)
    # filled by the view from successive polls
    putTps: float = 0.0
    getTps: float = 0.0
    lagBytes: int = 0  # behind the master's CommitLog end
    lagMs: int = 0  # since the master first had bytes this replica still lacks


@attrs.frozen(kw_only=True)
class BrokerSetStatus:
    cluster: str
    brokerName: str
    masterId: int | None = None
    masterAddr: str = ""
    masterEpoch: int = 0
    syncStateSet: list[int] = attrs.field(factory=list)
    syncStateSetEpoch: int = 0
    controllerMode: bool = False  # the figures above come from a controller
    replicas: list[ReplicaStatus] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class QueueOffsets:
    brokerName: str
    queueId: int
    minOffset: int
    maxOffset: int


@attrs.frozen(kw_only=True)
class TopicStatus:
    topic: str
    system: bool
    queues: list[QueueOffsets] = attrs.field(factory=list)
    error: str = ""


@attrs.frozen(kw_only=True)
class GroupQueue:
    topic: str
    brokerName: str
    queueId: int
    brokerOffset: int
    consumerOffset: int
    lag: int  # never negative: an uncommitted queue counts from 0


@attrs.frozen(kw_only=True)
class GroupStatus:
    group: str
    totalLag: int
    consumeTps: float
    queues: list[GroupQueue] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class Poll:
    """Everything one poll found, at ``t`` (epoch ms). ``topics``/``groups`` are None when this
    poll did not look at them (they are read less often than the HA figures)."""

    t: int
    namesrvs: list[NamesrvStatus]
    controllers: list[ControllerStatus]
    brokerSets: list[BrokerSetStatus]
    topics: list[TopicStatus] | None = None
    groups: list[GroupStatus] | None = None


def queue_lag(broker_offset: int, consumer_offset: int) -> int:
    """Messages a group has not consumed in one queue: never negative, and a queue with no
    committed offset (-1) counts everything up to the broker's offset (upstream dashboard
    #230/#242 show -1 or negative numbers there)."""
    return max(0, broker_offset - max(consumer_offset, 0))
