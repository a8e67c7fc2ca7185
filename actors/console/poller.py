"""Reads the cluster for the console: one `Poll` per round, every call bounded by a timeout and
all calls of a round made at once, so a dead or hung process costs one timeout, not a queue.

A round asks each NameServer for the cluster (GET_BROKER_CLUSTER_INFO), each controller replica
for its metadata and Raft state (CONTROLLER_GET_METADATA_INFO), the controller leader for every
broker set's master, epochs and SyncStateSet (CONTROLLER_GET_SYNC_STATE_DATA), and every broker
the NameServers or the controller know for its runtime figures (GET_BROKER_RUNTIME_INFO). Every
`slow_every` rounds it also reads the topics (the NameServer's list, GET_TOPIC_STATS_INFO at
each master, at most `max_topics`) and the consumer groups (GET_BROKER_CONSUME_STATS at each
master). The only state kept between rounds is the last topic and group lists.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import structlog
import trio

from rocketrio.actors.broker.tables.topic_config import looks_like_system_topic
from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.api import request
from rocketrio.actors.client.controller_admin import ControllerLink
from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.console.model import (
    BrokerSetStatus,
    ControllerStatus,
    GroupQueue,
    GroupStatus,
    NamesrvStatus,
    Poll,
    QueueOffsets,
    ReplicaStatus,
    TopicStatus,
    queue_lag,
)
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import (
    ClusterInfo,
    ConsumeStatsList,
    KVTable,
    TopicList,
    TopicStatsTable,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.controller_headers import (
    BrokerReplicasInfo,
    GetMetaDataResponseHeader,
    ReplicasInfo,
    encode_broker_names,
)
from rocketrio.protocol.headers import GetConsumeStatsInBrokerHeader, GetTopicStatsInfoRequestHeader
from rocketrio.protocol.serde import HeaderError, from_json

log = structlog.get_logger("console")

T = TypeVar("T")
_FAILURES = (RemotingError, MQClientError, HeaderError, ValueError, KeyError)


def _int(table: dict[str, str], key: str, default: int = 0) -> int:
    try:
        return int(table.get(key, default))
    except ValueError:
        return default


class ClusterPoller:
    """Reads one `Poll` per call of `poll` (see the module docstring)."""

    def __init__(
        self,
        admin: MQAdmin,
        controller_addrs: list[str],
        *,
        call_timeout_s: float = 1.0,
        slow_every: int = 4,
        max_topics: int = 200,
    ) -> None:
        self.admin = admin
        self.api = admin.api
        self.controller_addrs = controller_addrs
        self.link = (
            ControllerLink(admin.remoting, controller_addrs, call_timeout_s)
            if controller_addrs
            else None
        )
        self.call_timeout_s = call_timeout_s
        self.slow_every = slow_every
        self.max_topics = max_topics
        self.rounds = 0

    async def _bounded(self, fn: Callable[[], Awaitable[T]]) -> T | str:
        """``fn()``, or the text of its failure (a timeout included)."""
        try:
            with trio.fail_after(self.call_timeout_s * 2):
                return await fn()
        except trio.TooSlowError:
            return f"no answer within {self.call_timeout_s * 2:.1f} s"
        except _FAILURES as e:
            return f"{type(e).__name__}: {e}"

    async def poll(self, now_ms: int) -> Poll:
        results: dict[str, Any] = {}
        slow = self.rounds % self.slow_every == 0
        self.rounds += 1

        async def run(key: str, fn: Callable[[], Awaitable[Any]]) -> None:
            results[key] = await self._bounded(fn)

        async with trio.open_nursery() as n:
            for addr in self.api.namesrv_addrs:
                n.start_soon(run, f"ns:{addr}", lambda a=addr: self._cluster_info(a))
            for addr in self.controller_addrs:
                n.start_soon(run, f"ctl:{addr}", lambda a=addr: self._metadata(a))
        infos = {k[3:]: v for k, v in results.items() if k.startswith("ns:")}
        cluster = next((v for v in infos.values() if isinstance(v, ClusterInfo)), ClusterInfo())
        names = sorted({n for names in cluster.clusterAddrTable.values() for n in names})
        replicas: BrokerReplicasInfo | None = None
        if self.link is not None and names:
            got = await self._bounded(lambda: self._sync_state(names))
            if isinstance(got, BrokerReplicasInfo):
                replicas = got
            else:
                events.emit(log, events.ConsolePollFailed(addr="controller", error=got))
        sets = self._sets(cluster, replicas)
        runtime: dict[str, dict[str, str] | str] = {}
        async with trio.open_nursery() as n:
            for s in sets:
                for r in s.replicas:
                    n.start_soon(self._runtime_into, runtime, r.addr)
        sets = [self._with_runtime(s, runtime) for s in sets]
        topics = groups = None
        if slow:
            masters = [s.masterAddr for s in sets if s.masterAddr]
            system = {*cluster.clusterAddrTable, *names}
            topics = await self._topics(masters, system)
            groups = await self._groups(masters)
        return Poll(
            t=now_ms,
            namesrvs=[self._namesrv_status(a, v) for a, v in infos.items()],
            controllers=[
                self._controller_status(a, results[f"ctl:{a}"]) for a in self.controller_addrs
            ],
            brokerSets=sets,
            topics=topics,
            groups=groups,
        )

    # -- calls --------------------------------------------------------------------------------

    async def _cluster_info(self, addr: str) -> ClusterInfo:
        resp = await self.api.call(
            addr, RequestCode.GET_BROKER_CLUSTER_INFO, timeout_s=self.call_timeout_s
        )
        return from_json(ClusterInfo, resp.body)

    async def _metadata(self, addr: str) -> GetMetaDataResponseHeader:
        assert self.link is not None
        return await self.link.metadata(addr)

    async def _sync_state(self, names: list[str]) -> BrokerReplicasInfo:
        assert self.link is not None
        cmd = request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=encode_broker_names(names))
        resp = await self.link.invoke_leader(cmd)
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, self.link.leader_addr or "controller")
        return from_json(BrokerReplicasInfo, resp.body)

    async def _runtime_into(self, out: dict[str, dict[str, str] | str], addr: str) -> None:
        async def ask() -> dict[str, str]:
            resp = await self.api.call(
                addr, RequestCode.GET_BROKER_RUNTIME_INFO, timeout_s=self.call_timeout_s
            )
            return from_json(KVTable, resp.body).table

        out[addr] = await self._bounded(ask)

    # -- shaping ------------------------------------------------------------------------------

    @staticmethod
    def _namesrv_status(addr: str, v: ClusterInfo | str) -> NamesrvStatus:
        if isinstance(v, str):
            return NamesrvStatus(addr=addr, ok=False, error=v)
        brokers = sum(len(bd.brokerAddrs) for bd in v.brokerAddrTable.values())
        return NamesrvStatus(addr=addr, ok=True, clusters=len(v.clusterAddrTable), brokers=brokers)

    @staticmethod
    def _controller_status(addr: str, v: GetMetaDataResponseHeader | str) -> ControllerStatus:
        if isinstance(v, str):
            return ControllerStatus(addr=addr, ok=False, error=v)
        return ControllerStatus(
            addr=addr,
            ok=True,
            selfId=v.raftSelfId or "",
            role=v.raftRole or ("leader" if v.isLeader else "follower"),
            term=v.raftTerm or 0,
            leaderId=v.controllerLeaderId or "",
            leaderAddr=v.controllerLeaderAddress or "",
            commitIndex=v.raftCommitIndex or 0,
        )

    @staticmethod
    def _sets(info: ClusterInfo, replicas: BrokerReplicasInfo | None) -> list[BrokerSetStatus]:
        """One entry per broker set: the NameServer's live addresses, and the controller's
        master, epochs, SyncStateSet and replicas (dead ones too) when there is a controller."""
        out = []
        for cluster, names in sorted(info.clusterAddrTable.items()):
            for name in sorted(names):
                bd = info.brokerAddrTable.get(name)
                addrs = dict(bd.brokerAddrs) if bd is not None else {}
                ri: ReplicasInfo | None = (
                    replicas.replicasInfoTable.get(name) if replicas is not None else None
                )
                if ri is None:
                    out.append(
                        BrokerSetStatus(
                            cluster=cluster,
                            brokerName=name,
                            masterId=0 if 0 in addrs else None,
                            masterAddr=addrs.get(0, ""),
                            replicas=[
                                ReplicaStatus(brokerId=i, addr=a, ok=False)
                                for i, a in sorted(addrs.items())
                            ],
                        )
                    )
                    continue
                found: dict[int, ReplicaStatus] = {}
                for member, in_sync in [(m, True) for m in ri.inSyncReplicas] + [
                    (m, False) for m in ri.notInSyncReplicas
                ]:
                    found[member.brokerId] = ReplicaStatus(
                        brokerId=member.brokerId,
                        addr=member.brokerAddress or "",
                        ok=False,
                        alive=member.alive,
                        inSync=in_sync,
                    )
                for bid, addr in addrs.items():  # the NameServer's ids: 0 is the master
                    if addr not in {r.addr for r in found.values()}:
                        found[-1 - bid] = ReplicaStatus(brokerId=bid, addr=addr, ok=False)
                out.append(
                    BrokerSetStatus(
                        cluster=cluster,
                        brokerName=name,
                        masterId=ri.masterBrokerId,
                        masterAddr=ri.masterAddress or "",
                        masterEpoch=ri.masterEpoch,
                        syncStateSet=sorted(m.brokerId for m in ri.inSyncReplicas),
                        syncStateSetEpoch=ri.syncStateSetEpoch,
                        controllerMode=True,
                        replicas=sorted(found.values(), key=lambda r: r.brokerId),
                    )
                )
        return out

    @staticmethod
    def _with_runtime(
        s: BrokerSetStatus, runtime: dict[str, dict[str, str] | str]
    ) -> BrokerSetStatus:
        reps = []
        for r in s.replicas:
            got = runtime.get(r.addr, "not asked")
            if isinstance(got, str):
                reps.append(attrs.evolve(r, ok=False, error=got))
                continue
            reps.append(
                attrs.evolve(
                    r,
                    ok=True,
                    error="",
                    role=got.get("brokerRole", ""),
                    maxOffset=_int(got, "commitLogMaxOffset"),
                    confirmOffset=_int(got, "confirmOffset", -1),
                    masterEpoch=_int(got, "masterEpoch"),
                    putTotal=_int(got, "msgPutTotalTodayNow"),
                    getTotal=_int(got, "msgGetTotalTodayNow"),
                )
            )
        return attrs.evolve(s, replicas=reps)

    async def _topics(self, masters: list[str], system: set[str]) -> list[TopicStatus] | None:
        got = await self._bounded(
            lambda: self.api.call_namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        )
        if isinstance(got, str):
            events.emit(log, events.ConsolePollFailed(addr="namesrv topic list", error=got))
            return None
        names = sorted(from_json(TopicList, got.body).topicList)
        user = [t for t in names if not looks_like_system_topic(t, system)]
        shown = (user + [t for t in names if t not in user])[: self.max_topics]
        stats: dict[tuple[str, str], Any] = {}

        async def one(topic: str, addr: str) -> None:
            async def ask() -> TopicStatsTable | None:
                try:
                    resp = await self.api.call(
                        addr,
                        RequestCode.GET_TOPIC_STATS_INFO,
                        GetTopicStatsInfoRequestHeader(topic),
                        timeout_s=self.call_timeout_s,
                    )
                except MQBrokerError as e:
                    if e.code == ResponseCode.TOPIC_NOT_EXIST:
                        return None  # the topic has no queues on this broker set
                    raise
                return from_json(TopicStatsTable, resp.body)

            stats[(topic, addr)] = await self._bounded(ask)

        limiter = trio.CapacityLimiter(16)

        async def limited(topic: str, addr: str) -> None:
            async with limiter:
                await one(topic, addr)

        async with trio.open_nursery() as n:
            for t in shown:
                if looks_like_system_topic(t, system):
                    continue  # listed, offsets not read (they are the brokers' own)
                for addr in masters:
                    n.start_soon(limited, t, addr)
        out = []
        for t in shown:
            queues, errors = [], []
            for addr in masters:
                table = stats.get((t, addr))
                if table is None:
                    continue
                if isinstance(table, str):
                    errors.append(f"{addr}: {table}")
                    continue
                queues += [
                    QueueOffsets(
                        brokerName=mq.brokerName,
                        queueId=mq.queueId,
                        minOffset=o.minOffset,
                        maxOffset=o.maxOffset,
                    )
                    for mq, o in table.offsetTable.items()
                ]
            queues.sort(key=lambda q: (q.brokerName, q.queueId))
            out.append(
                TopicStatus(
                    topic=t,
                    system=looks_like_system_topic(t, system),
                    queues=queues,
                    error="; ".join(errors),
                )
            )
        return out

    async def _groups(self, masters: list[str]) -> list[GroupStatus] | None:
        merged: dict[str, list[GroupQueue]] = {}
        tps: dict[str, float] = {}
        for addr in masters:

            async def ask(a: str = addr) -> ConsumeStatsList:
                resp = await self.api.call(
                    a,
                    RequestCode.GET_BROKER_CONSUME_STATS,
                    GetConsumeStatsInBrokerHeader(False),
                    timeout_s=self.call_timeout_s,
                )
                return from_json(ConsumeStatsList, resp.body)

            got = await self._bounded(ask)
            if isinstance(got, str):
                events.emit(log, events.ConsolePollFailed(addr=addr, error=got))
                return None
            for entry in got.consumeStatsList:
                for group, stats_list in entry.items():
                    for cs in stats_list:
                        tps[group] = tps.get(group, 0.0) + cs.consumeTps
                        for mq, w in cs.offsetTable.items():
                            merged.setdefault(group, []).append(
                                GroupQueue(
                                    topic=mq.topic,
                                    brokerName=mq.brokerName,
                                    queueId=mq.queueId,
                                    brokerOffset=w.brokerOffset,
                                    consumerOffset=w.consumerOffset,
                                    lag=queue_lag(w.brokerOffset, w.consumerOffset),
                                )
                            )
        out = []
        for group in sorted(merged):
            qs = sorted(merged[group], key=lambda q: (q.topic, q.brokerName, q.queueId))
            out.append(
                GroupStatus(
                    group=group,
                    totalLag=sum(q.lag for q in qs),
                    consumeTps=round(tps.get(group, 0.0), 1),
                    queues=qs,
                )
            )
        return out
