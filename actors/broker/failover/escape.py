"""Escape (RIP-32 EscapeBridge, SPEC A3): where an acting slave writes the secondary messages it
hands on, since its own CommitLog must not fork from its dead master's.

`EscapeBridge` (store/escape_bridge.py) is the one interface the special services use:
`put_to_live_master(msgs)` writes messages to a live master of ANOTHER group and answers None once
they are stored there, else why not. Two implementations:

- `LocalEscape`, in a broker container: the container's serving masters of other groups, in the
  order they joined (upstream peekMasterBroker, minus the own group), each through its
  `LocalTarget` (the topic must exist there: the message goes to its store directly, no network
  hop); when none takes it, the remote one below, if enabled;
- `RemoteEscape` (enableRemoteEscape): SEND_MESSAGE_V2 to a master chosen from the route. A retry
  or DLQ topic that lives only on the dead group (POP revive) goes to a master of the cluster (the
  route of the cluster-name topic), whose send path creates it.

Rules, each a fix of an upstream hazard (see the facts sheet):

- never the dead master's own group (#7923): `choose_target` skips this broker's brokerName
  whatever a stale route says, and only takes a group whose route shows a real, writable master
  (brokerId 0 present and the queue's write bit set: an acting slave is routed as id 0 with the
  write bit cleared, so it is never chosen);
- no skipping after N failures (#9249, #7927, the 10-failure half skip): a failed put answers the
  error and the caller keeps its place and tries again later; nothing here counts failures;
- one target per key while the route holds it: `choose_target` picks by a stable hash of the key
  among the candidate groups sorted by name, so the CK and ACK of one POP message (same key) go
  to the same master; a failed target is avoided on the next try (fault avoidance);
- one message per call from the schedule service, so a failure re-sends at most that message
  (duplicates stay within at-least-once: a crash between the remote store and our offset write).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol

import attrs

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.store.escape_bridge import EscapeBridge
from rocketrio.actors.broker.store.messages import StoreWriter, put_and_wait
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.protocol.bodies import PERM_WRITE, TopicConfig, TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import GetRouteInfoRequestHeader, SendMessageRequestHeaderV2
from rocketrio.protocol.message import (
    NAME_VALUE_SEPARATOR,
    UNIQ_KEY,
    encode_properties,
    find_property,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_json, to_ext
from rocketrio.storage.store_types import MessageToStore

MASTER_ID = 0
CALL_TIMEOUT_S = 3.0  # upstream: one send, 3 s
_STORED = (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT)
_STORED = (*_STORED, ResponseCode.SLAVE_NOT_AVAILABLE)  # stored on the master, not yet copied


@attrs.frozen
class EscapeTarget:
    broker_name: str
    addr: str
    queue_id: int


def choose_target(
    route: TopicRouteData,
    own_broker_name: str,
    key: str,
    queue_id: int,
    avoid: frozenset[str] = frozenset(),
) -> EscapeTarget | None:
    """The master of another group a message of ``key`` goes to (module docstring), or None."""
    writable = {q.brokerName: q for q in route.queueDatas if q.perm & PERM_WRITE}
    candidates: list[EscapeTarget] = []
    for bd in sorted(route.brokerDatas, key=lambda b: b.brokerName):
        qd = writable.get(bd.brokerName)
        addr = bd.brokerAddrs.get(MASTER_ID)
        if bd.brokerName == own_broker_name or qd is None or addr is None:
            continue
        candidates.append(EscapeTarget(bd.brokerName, addr, queue_id % max(qd.writeQueueNums, 1)))
    if not candidates:
        return None
    preferred = [c for c in candidates if c.broker_name not in avoid] or candidates
    return preferred[zlib.crc32(key.encode()) % len(preferred)]


def _request(code: int, header: object, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code=code, ext_fields=to_ext(header), body=body)


class TopicLookup(Protocol):
    def select(self, topic: str) -> TopicConfig | None: ...


class LocalTarget:
    """A master's own entry for the in-process escape of the other brokers of its container:
    messages to topics it has (writable) go to its store at once, queue ids folded into its
    write queues."""

    def __init__(self, broker_name: str, topics: TopicLookup, writer: StoreWriter) -> None:
        self.broker_name = broker_name
        self.topics = topics
        self.writer = writer
        self.written = 0

    async def put(self, msgs: list[MessageToStore]) -> str | None:
        placed: list[MessageToStore] = []
        for msg in msgs:
            tc = self.topics.select(msg.topic)
            if tc is None or not tc.perm & PERM_WRITE or tc.writeQueueNums <= 0:
                return f"{self.broker_name} has no writable topic {msg.topic}"
            placed.append(attrs.evolve(msg, queue_id=msg.queue_id % tc.writeQueueNums))
        answer = await put_and_wait(self.writer, placed)
        if not answer.stored:
            return f"{self.broker_name}: {answer.status.value}: {answer.remark or ''}"
        self.written += len(placed)
        return None


class LocalEscape:
    """`EscapeBridge` inside a broker container (module docstring)."""

    def __init__(
        self,
        own_broker_name: str,
        masters: Callable[[], list[LocalTarget]],
        fallback: EscapeBridge | None = None,
    ) -> None:
        self.own = own_broker_name
        self.masters = masters
        self.fallback = fallback

    async def put_to_live_master(self, msgs: list[MessageToStore]) -> str | None:
        errors: list[str] = []
        for target in self.masters():
            if target.broker_name == self.own:
                continue  # never the dead master's own group (#7923)
            error = await target.put(msgs)
            if error is None:
                return None
            errors.append(error)
        if self.fallback is not None:
            return await self.fallback.put_to_live_master(msgs)
        return "no master of another group in this container takes it" + (
            ": " + "; ".join(errors) if errors else ""
        )


class RemoteEscape:
    """`EscapeBridge` over the network (enableRemoteEscape): SEND_MESSAGE_V2 to the chosen master,
    with the route asked of the NameServers for every put (a route cached across a master's
    death is how upstream escaped to the dead group, #7923)."""

    def __init__(self, config: BrokerConfig, client: RemotingClient) -> None:
        self.config = config
        self.client = client
        self.group = f"InnerProducerGroup_{config.brokerName}_{config.brokerId}"
        self._avoid: set[str] = set()
        self.written = 0

    async def put_to_live_master(self, msgs: list[MessageToStore]) -> str | None:
        for msg in msgs:
            error = await self._put_one(msg)
            if error is not None:
                return error
        return None

    async def _route(self, topic: str) -> TopicRouteData | str:
        cmd = _request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic, True))
        errors: list[str] = []
        for ns in self.config.namesrv_addrs:
            try:
                resp = await self.client.invoke(ns, cmd, CALL_TIMEOUT_S)
            except RemotingError as e:
                errors.append(f"{ns}: {e}")
                continue
            if resp.code != ResponseCode.SUCCESS:
                errors.append(f"{ns}: code {resp.code} {resp.remark or ''}")
                continue
            try:
                return from_json(TopicRouteData, resp.body)
            except HeaderError as e:
                errors.append(f"{ns}: {e}")
        return "no route for " + topic + (": " + "; ".join(errors) if errors else "")

    async def _target(self, msg: MessageToStore, key: str) -> EscapeTarget | str:
        """The master for ``msg``: one serving its topic, else (a retry or DLQ topic that lives
        only on the dead group) any master of the cluster, whose send path creates the topic."""
        avoid, own = frozenset(self._avoid), self.config.brokerName
        route = await self._route(msg.topic)
        if not isinstance(route, str):
            target = choose_target(route, own, key, msg.queue_id, avoid)
            if target is not None:
                return target
        if msg.topic.startswith(("%RETRY%", "%DLQ%")):
            cluster = await self._route(self.config.brokerClusterName)
            if not isinstance(cluster, str):
                target = choose_target(cluster, own, key, 0, avoid)
                if target is not None:
                    return attrs.evolve(target, queue_id=0)
        return route if isinstance(route, str) else f"no live master of another group: {msg.topic}"

    async def live_masters(self) -> dict[str, str] | str:
        """brokerName -> address of the writable masters of other groups (the route of the
        cluster-name topic, which every broker serves), or why none is known."""
        route = await self._route(self.config.brokerClusterName)
        if isinstance(route, str):
            return route
        writable = {q.brokerName for q in route.queueDatas if q.perm & PERM_WRITE}
        return {
            bd.brokerName: bd.brokerAddrs[MASTER_ID]
            for bd in route.brokerDatas
            if bd.brokerName != self.config.brokerName
            and bd.brokerName in writable
            and MASTER_ID in bd.brokerAddrs
        }

    async def _put_one(self, msg: MessageToStore) -> str | None:
        props = msg.properties
        if isinstance(props, str):
            key = find_property(props, UNIQ_KEY + NAME_VALUE_SEPARATOR) or msg.topic
        else:
            key = props.get(UNIQ_KEY, msg.topic)
        target = await self._target(msg, key)
        if isinstance(target, str):
            return target
        return await self.send_to(target, msg)

    async def send_to(self, target: EscapeTarget, msg: MessageToStore) -> str | None:
        """``msg`` to ``target``'s queue ``target.queue_id``; None once stored there."""
        props = msg.properties
        header = SendMessageRequestHeaderV2(
            a=self.group, b=msg.topic, c="TBW102", d=4, e=target.queue_id, f=msg.sys_flag,
            g=msg.born_timestamp, h=msg.flag,
            i=props if isinstance(props, str) else encode_properties(props),
            j=msg.reconsume_times, k=False, m=False, n=target.broker_name,
        )  # fmt: skip
        cmd = _request(RequestCode.SEND_MESSAGE_V2, header, msg.body)
        try:
            resp = await self.client.invoke(target.addr, cmd, CALL_TIMEOUT_S)
        except RemotingError as e:
            self._avoid.add(target.broker_name)
            return f"{target.broker_name} {target.addr}: {e}"
        if resp.code not in _STORED:
            self._avoid.add(target.broker_name)
            return f"{target.broker_name} {target.addr}: code {resp.code} {resp.remark or ''}"
        self._avoid.discard(target.broker_name)
        self.written += 1
        return None
