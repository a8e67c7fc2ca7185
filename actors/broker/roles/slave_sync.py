"""SlaveSynchronize: a slave copies its master's topics, subscription groups and consumer offsets.

Upstream's slave syncs its metadata from the master on a timer; without it a promoted slave
would not know the topics its CommitLog holds (producers would auto-create them with other
queue counts, or fail), and consumers of the new master would start from stale offsets.
While this broker is a slave and knows its master's address, every `SYNC_PERIOD_S` (and at once
when the master changes) it asks the master for GET_ALL_TOPIC_CONFIG,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG and GET_ALL_CONSUMER_OFFSET and adopts them:

- topics and groups: the master's table replaces ours when its DataVersion differs (upstream),
  keeping our stateVersion (the masterEpoch the NameServers compare, #6316); then persisted;
- static-topic mappings (topicQueueMapping.json, RIP-21's source of truth): GET_ALL_TOPIC_CONFIG
  answers them with the topics (upstream TopicConfigAndMappingSerializeWrapper's
  topicQueueMappingDetailMap and mappingDataVersion); the master's table replaces ours when
  its DataVersion differs and is written before topics.json. A mapping names its broker set
  (``bname`` = brokerName, shared by master and slaves), so the slave keeps its own set's
  mappings and refuses (logs, never uses) one naming another set. A promoted slave thus leads
  the same logic queues; their consumer offsets are logic values in the offset table below.
  A logic queue the new mapping moved away from this set has its held pulls answered
  (``release_held``): nothing arrives at its physical queue here any more;
- consumer offsets: the master's offset for a queue replaces ours (upstream's putAll), so a
  consumer that committed to this slave while the master was down may re-read a little once the
  master is back (at-least-once); persisted by the offset table's periodic writer. With
  enableSlaveActingMaster (RIP-32, `keep_higher`) an offset only ever rises here: the returning
  master took this slave's maxima in pre-online and keeps taking them for a while, so a commit
  that reached this slave after the master's return is not undone by the master's older copy
  (an admin reset backwards on the master does not reach the slave then);
- delay offsets (GET_ALL_DELAY_OFFSET, delayOffset.json): the master's table replaces ours,
  so a promoted slave's schedule service re-puts from where the master stopped (at most what
  the master re-put since this slave's last round is re-put again);
- message request modes (GET_ALL_MESSAGE_REQUEST_MODE, messageRequestMode.json): the master's
  table replaces ours and is persisted when it differs (upstream syncMessageRequestMode), so a
  slave's QUERY_ASSIGNMENT answers with the modes set on its master;
- ACL 2.0 users and ACLs (AUTH_LIST_USER / AUTH_LIST_ACL, signed with the broker's
  innerClientAuthenticationCredentials like every call it makes): the master's tables replace
  ours when they differ, then both files are persisted, so a promoted slave enforces the same
  policies. The slave's own initAuthenticationUser / inner credentials users are kept. Upstream
  does not sync these (its mqadmin writes every broker of a cluster instead, which
  `rocketrio admin ... -c` does too); syncing also covers a slave that was down during a change.

Only a slave adopts: every answer is checked against the master this broker follows *now*
before anything is applied. A request sent while this broker was a slave can be answered after
it was promoted (its old master hung, was replaced, then woke up and answered): applying that
answer would overwrite the new master's topics with the old master's, narrowing a topic whose
upper queues already hold acknowledged messages, and set consumer offsets back.

Besides the period, a sync runs as soon as the store holds a queue it did not hold at the last
sync (`queue_count`): a topic created on the master moments ago reaches this slave's table one
round trip after its first replicated record, not up to `SYNC_PERIOD_S` later. One task polls
the master's address and the queue count every `POLL_S` for both loops below and wakes them
only when either moved: an idle broker wakes ten times a second for this, not twenty; a
classic master, which never follows anyone (`RoleService.may_follow`), runs none of it.

The consumer offsets have a loop of their own: one GET_ALL_CONSUMER_OFFSET every
`SYNC_PERIOD_S` (and at once when the master changes), bounded by `CALL_TIMEOUT_S`, so a slave's
offsets lag its master's by at most one period and one call (the 6 s bound of
docs/metadata-failover.md) however long a round of the other tables takes: five or six calls,
each a round trip on a slow link, and config writes on a slow disk.

A failed call is logged once and retried next period; nothing here ever blocks the broker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import structlog
import trio

from rocketrio.actors.auth.model import AuthDataError, acl_from_info, user_from_info
from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.auth import AuthTable
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.actors.broker.tables.delay_offset import (
    DelayOffsetSerializeWrapper,
    DelayOffsetTable,
)
from rocketrio.actors.broker.tables.request_mode import RequestModeTable
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingTable
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.actors.observe import events
from rocketrio.protocol.assignment import MessageRequestModeSerializeWrapper
from rocketrio.protocol.auth_bodies import AclInfo, UserInfo
from rocketrio.protocol.bodies import (
    ConsumerOffsetSerializeWrapper,
    DataVersion,
    SubscriptionGroupWrapper,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_json
from rocketrio.protocol.static_topic import (
    TopicConfigAndMappingDetailWrapper,
    TopicQueueMappingDetail,
    TopicQueueMappingSerializeWrapper,
)

SYNC_PERIOD_S = 3.0
POLL_S = 0.1  # how soon a change of master (or a new queue) cuts a period short
CALL_TIMEOUT_S = 3.0


class SlaveSynchronize:
    """See module docstring. Run with ``nursery.start_soon(sync.run, client)``."""

    @classmethod
    def of(
        cls,
        io: BrokerIO,
        tables: BrokerTables,
        view: StoreView,
        master_addr: Callable[[], str | None],
        may_follow: bool = True,
        release_held: Callable[[str, list[int]], None] = lambda topic, queues: None,
    ) -> SlaveSynchronize:
        """A broker's slave sync over all its tables (``may_follow``: `RoleService.may_follow`;
        ``release_held``: the pull hold service's `release_queues`)."""
        return cls(
            topics=tables.topics,
            groups=tables.groups,
            offsets=tables.offsets,
            auth=tables.auth,
            master_addr=master_addr,
            queue_count=view.queue_count,
            log=io.log.bind(actor="slave_sync"),
            delay_offsets=tables.delay_offsets.table,
            mappings=tables.mappings,
            keep_higher=io.config.enableSlaveActingMaster,
            may_follow=may_follow,
            request_modes=tables.request_modes,
            release_held=release_held,
        )

    def __init__(
        self,
        *,
        topics: TopicTable,
        groups: GroupTable,
        offsets: OffsetTable,
        master_addr: Callable[[], str | None],
        queue_count: Callable[[], int] = lambda: 0,
        auth: AuthTable | None = None,
        log: Any = None,
        delay_offsets: DelayOffsetTable | None = None,
        mappings: TopicQueueMappingTable | None = None,
        keep_higher: bool = False,
        may_follow: bool = True,
        request_modes: RequestModeTable | None = None,
        release_held: Callable[[str, list[int]], None] = lambda topic, queues: None,
    ) -> None:
        # (topic, physical queue ids): answer the pulls held on queues whose logic queue the
        # synced mapping moved away from this set (pull/hold.py release_queues)
        self.release_held = release_held
        self.may_follow = may_follow
        self.request_modes = request_modes
        self.keep_higher = keep_higher
        self.mappings = mappings
        self.auth = auth
        self.delay_offsets = delay_offsets
        self.queue_count = queue_count
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.master_addr = master_addr
        self.log = log or structlog.get_logger("broker").bind(actor="slave_sync")
        self.synced_from: str | None = None
        self.rounds = 0  # metadata rounds (all of sync_all, or the loop's sync_metadata)
        self.offset_rounds = 0
        self.stale_answers = 0
        self._failing = False
        self._queues_at_sync = -1
        self._moved = trio.Event()  # set (and replaced) by `_watch` when master or queues move

    async def run(self, client: RemotingClient) -> None:
        """The metadata rounds, and the consumer offsets in a loop of their own (see the
        module docstring: a slow round never holds the offsets back). A broker that can never
        follow a master (a classic master) has nothing to copy and does not poll."""
        if not self.may_follow:
            await trio.sleep_forever()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch)
            nursery.start_soon(self._offsets_loop, client)
            await self._metadata_loop(client)

    async def _watch(self) -> None:
        """One poll for both loops: every `POLL_S`, wake the waiting loops (`_wait_period`) when
        the master or the queue count moved since the last poll. An idle broker (a master, or
        a slave between rounds) wakes once a poll, not once a loop."""
        seen = self._watched()
        while True:
            await trio.sleep(POLL_S)
            now = self._watched()
            if now != seen:
                seen = now
                moved, self._moved = self._moved, trio.Event()
                moved.set()

    async def _metadata_loop(self, client: RemotingClient) -> None:
        while True:
            addr = self.master_addr()
            if addr is not None:
                self._queues_at_sync = self.queue_count()
                try:
                    await self.sync_metadata(client, addr)
                except (RemotingError, HeaderError, SyncRefused) as e:
                    if not self._failing:
                        self._failing = True
                        events.emit(self.log, events.SlaveSyncFailed(master=addr, error=str(e)))
                else:
                    self.rounds += 1
                    if self._failing or addr != self.synced_from:
                        events.emit(self.log, events.SlaveSynced(master=addr))
                    self._failing = False
                    self.synced_from = addr
            await self._wait_period(addr, on_new_queue=True)

    def _watched(self) -> tuple[str | None, int]:
        """What `_watch` compares: the master, and the queue count while there is one (a
        master's own new queues wake nothing: `_new_queue`)."""
        addr = self.master_addr()
        return addr, -1 if addr is None else self.queue_count()

    async def _offsets_loop(self, client: RemotingClient) -> None:
        failing = False
        while True:
            addr = self.master_addr()
            if addr is not None:
                try:
                    await self.sync_offsets(client, addr)
                except (RemotingError, HeaderError, SyncRefused) as e:
                    if not failing:
                        events.emit(self.log, events.SlaveSyncFailed(master=addr, error=str(e)))
                    failing = True
                else:
                    failing = False
            await self._wait_period(addr, on_new_queue=False)

    async def _wait_period(self, addr: str | None, *, on_new_queue: bool) -> None:
        """`SYNC_PERIOD_S`, cut short when the master changes (or a new queue appears), seen
        within `POLL_S` by `_watch`. The condition is checked before each wait (no await in
        between), so a change made while this loop was in its round is not missed."""
        with trio.move_on_after(SYNC_PERIOD_S):
            while self.master_addr() == addr and not (on_new_queue and self._new_queue(addr)):
                await self._moved.wait()

    def _new_queue(self, addr: str | None) -> bool:
        """A slave's store holds a queue it did not hold when the last round started."""
        return addr is not None and self.queue_count() != self._queues_at_sync

    async def sync_all(self, client: RemotingClient, addr: str) -> None:
        """One round of everything: the metadata, then the consumer offsets."""
        await self.sync_metadata(client, addr)
        await self.sync_offsets(client, addr)
        self.rounds += 1

    async def sync_metadata(self, client: RemotingClient, addr: str) -> None:
        """Topics (and static-topic mappings), groups, delay offsets, request modes and ACLs:
        each table is fetched, then applied only while ``addr`` is still the master this broker
        follows (no await between that check and the change)."""
        topics = await self._get(client, addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        wrapper = from_json(TopicConfigAndMappingDetailWrapper, topics)
        mappings = self.mappings
        refused: list[TopicQueueMappingDetail] | None = None
        held = dict(mappings.table) if mappings is not None else {}
        if mappings is not None and _differs(wrapper.mappingDataVersion, mappings.data_version):
            refused = mappings.adopt(
                TopicQueueMappingSerializeWrapper(
                    wrapper.topicQueueMappingDetailMap, wrapper.mappingDataVersion
                )
            )
        topics_changed = _differs(wrapper.dataVersion, self.topics.data_version)
        if topics_changed:
            state = self.topics.data_version.stateVersion
            self.topics.load(wrapper)
            v = self.topics.data_version
            self.topics.data_version = DataVersion(state, v.timestamp, v.counter)
        if mappings is not None and refused is not None:  # the source of truth first
            self._mappings_adopted(addr, mappings, refused)
            await mappings.persist()
            for topic, before in held.items():
                if moved := before.released_by(mappings.table.get(topic)):
                    self.release_held(topic, sorted(moved.values()))
        if topics_changed:
            await self.topics.persist()
        groups = await self._get(client, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        gw = from_json(SubscriptionGroupWrapper, groups)
        if _differs(gw.dataVersion, self.groups.data_version):
            # the forbidden bits are each broker's own (upstream copies only the group configs)
            self.groups.load(attrs.evolve(gw, forbiddenTable=self.groups.forbidden))
            await self.groups.persist()
        if self.delay_offsets is not None:
            raw = await self._get(client, addr, RequestCode.GET_ALL_DELAY_OFFSET)
            self.delay_offsets.adopt(from_json(DelayOffsetSerializeWrapper, raw))
        if self.request_modes is not None:
            raw = await self._get(client, addr, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE)
            if self.request_modes.adopt(from_json(MessageRequestModeSerializeWrapper, raw)):
                await self.request_modes.persist()
        if self.auth is not None:
            await self._sync_auth(client, addr, self.auth)

    async def sync_offsets(self, client: RemotingClient, addr: str) -> None:
        """The master's consumer offsets (one call), applied only while ``addr`` is still the
        master this broker follows."""
        raw = await self._get(client, addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        ow = from_json(ConsumerOffsetSerializeWrapper, raw)
        if adopt_offsets(self.offsets.table, ow.offsetTable, keep_higher=self.keep_higher):
            self.offsets.dirty = True
        self.offset_rounds += 1

    def _mappings_adopted(
        self,
        addr: str,
        mappings: TopicQueueMappingTable,
        refused: list[TopicQueueMappingDetail],
    ) -> None:
        for detail in refused:
            events.emit(
                self.log,
                events.StaticTopicMappingRefused(
                    topic=detail.topic,
                    mapping_bname=detail.bname,
                    reason=f"synced from master {addr} but belongs to broker {detail.bname}",
                ),
            )
        events.emit(
            self.log,
            events.StaticTopicMappingSynced(
                master=addr, topics=sorted(mappings.table), refused=len(refused)
            ),
        )

    async def _sync_auth(self, client: RemotingClient, addr: str, auth: AuthTable) -> None:
        raw_users = await self._get(client, addr, RequestCode.AUTH_LIST_USER)
        raw_acls = await self._get(client, addr, RequestCode.AUTH_LIST_ACL)
        try:
            users = [user_from_info(u) for u in from_json(list[UserInfo], raw_users or b"[]")]
            acls = [acl_from_info(a) for a in from_json(list[AclInfo], raw_acls or b"[]")]
        except AuthDataError as e:
            raise SyncRefused(f"master's users/ACLs are not valid: {e}") from None
        if auth.adopt(users, acls):
            await auth.persist()
            events.emit(self.log, events.AuthSynced(master=addr, users=len(users), acls=len(acls)))

    async def _get(self, client: RemotingClient, addr: str, code: int) -> bytes:
        resp = await client.invoke(addr, RemotingCommand(code), CALL_TIMEOUT_S)
        if self.master_addr() != addr:
            self.stale_answers += 1
            raise SyncRefused(f"{code}: answered by {addr}, no longer this broker's master")
        if resp.code != ResponseCode.SUCCESS:
            raise SyncRefused(f"{code}: {resp.code} {resp.remark}")
        return resp.body


def adopt_offsets(
    mine: dict[str, dict[int, int]], theirs: dict[str, dict[int, int]], *, keep_higher: bool
) -> bool:
    """The master's offsets replace ours (upstream's putAll); with ``keep_higher`` an offset
    only rises (RIP-32, module docstring). True when anything changed."""
    changed = False
    for key, queues in theirs.items():
        table = mine.setdefault(key, {})
        for qid, offset in queues.items():
            if table.get(qid) != offset and not (keep_higher and table.get(qid, -1) > offset):
                table[qid] = offset
                changed = True
    return changed


class SyncRefused(Exception):
    """The master refused a call, sent invalid data, or is no longer this broker's master."""


def _differs(a: DataVersion, b: DataVersion) -> bool:
    return (a.timestamp, a.counter) != (b.timestamp, b.counter)
