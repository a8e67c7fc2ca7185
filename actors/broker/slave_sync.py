"""SlaveSynchronize: a slave copies its master's topics, subscription groups and consumer offsets.

Upstream's slave syncs its metadata from the master on a timer; without it a promoted slave
would not know the topics its CommitLog holds (producers would auto-create them with other
queue counts, or fail), and consumers of the new master would start from stale offsets.
While this broker is a slave and knows its master's address, every `SYNC_PERIOD_S` (and at once
when the master changes) it asks the master for GET_ALL_TOPIC_CONFIG,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG and GET_ALL_CONSUMER_OFFSET and adopts them:

- topics and groups: the master's table replaces ours when its DataVersion differs (upstream),
  keeping our stateVersion (the masterEpoch the NameServers compare, #6316); then persisted;
- consumer offsets: the master's offset for a queue replaces ours (upstream's putAll), so a
  consumer that committed to this slave while the master was down may re-read a little once the
  master is back (at-least-once); persisted by the offset table's periodic writer;
- ACL 2.0 users and ACLs (AUTH_LIST_USER / AUTH_LIST_ACL, signed with the broker's
  innerClientAuthenticationCredentials like every call it makes): the master's tables replace
  ours when they differ, then both files are persisted, so a promoted slave enforces the same
  policies. The slave's own initAuthenticationUser / inner credentials users are kept. Upstream
  does not sync these (its mqadmin writes every broker of a cluster instead, which
  `rocketrio admin ... -c` does too); syncing also covers a slave that was down during a change.

A failed call is logged once and retried next period; nothing here ever blocks the broker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
import trio

from rocketrio.actors import events
from rocketrio.actors.auth.model import AuthDataError, acl_from_info, user_from_info
from rocketrio.actors.broker.auth_tables import AuthTable
from rocketrio.actors.broker.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.actors.remoting import RemotingClient, RemotingError
from rocketrio.protocol.auth_bodies import AclInfo, UserInfo
from rocketrio.protocol.bodies import (
    ConsumerOffsetSerializeWrapper,
    DataVersion,
    SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_json

SYNC_PERIOD_S = 3.0
CALL_TIMEOUT_S = 3.0


class SlaveSynchronize:
    """See module docstring. Run with ``nursery.start_soon(sync.run, client)``."""

    def __init__(
        self,
        *,
        topics: TopicTable,
        groups: GroupTable,
        offsets: OffsetTable,
        master_addr: Callable[[], str | None],
        auth: AuthTable | None = None,
        log: Any = None,
    ) -> None:
        self.auth = auth
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.master_addr = master_addr
        self.log = log or structlog.get_logger("broker").bind(actor="slave_sync")
        self.synced_from: str | None = None
        self.rounds = 0
        self._failing = False

    async def run(self, client: RemotingClient) -> None:
        while True:
            addr = self.master_addr()
            if addr is not None:
                try:
                    await self.sync_all(client, addr)
                except (RemotingError, HeaderError, _Refused) as e:
                    if not self._failing:
                        self._failing = True
                        events.emit(self.log, events.SlaveSyncFailed(master=addr, error=str(e)))
                else:
                    if self._failing or addr != self.synced_from:
                        events.emit(self.log, events.SlaveSynced(master=addr))
                    self._failing = False
                    self.synced_from = addr
            with trio.move_on_after(SYNC_PERIOD_S):
                while self.master_addr() == addr:
                    await trio.sleep(0.1)

    async def sync_all(self, client: RemotingClient, addr: str) -> None:
        topics = await self._get(client, addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        wrapper = from_json(TopicConfigSerializeWrapper, topics)
        if _differs(wrapper.dataVersion, self.topics.data_version):
            state = self.topics.data_version.stateVersion
            self.topics.load(wrapper)
            v = self.topics.data_version
            self.topics.data_version = DataVersion(state, v.timestamp, v.counter)
            await self.topics.persist()
        groups = await self._get(client, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        gw = from_json(SubscriptionGroupWrapper, groups)
        if _differs(gw.dataVersion, self.groups.data_version):
            self.groups.load(gw)
            await self.groups.persist()
        offsets = await self._get(client, addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        ow = from_json(ConsumerOffsetSerializeWrapper, offsets)
        changed = False
        for key, queues in ow.offsetTable.items():
            mine = self.offsets.table.setdefault(key, {})
            for qid, offset in queues.items():
                if mine.get(qid) != offset:
                    mine[qid] = offset
                    changed = True
        if changed:
            self.offsets.dirty = True
        if self.auth is not None:
            await self._sync_auth(client, addr, self.auth)
        self.rounds += 1

    async def _sync_auth(self, client: RemotingClient, addr: str, auth: AuthTable) -> None:
        raw_users = await self._get(client, addr, RequestCode.AUTH_LIST_USER)
        raw_acls = await self._get(client, addr, RequestCode.AUTH_LIST_ACL)
        try:
            users = [user_from_info(u) for u in from_json(list[UserInfo], raw_users or b"[]")]
            acls = [acl_from_info(a) for a in from_json(list[AclInfo], raw_acls or b"[]")]
        except AuthDataError as e:
            raise _Refused(f"master's users/ACLs are not valid: {e}") from None
        if auth.adopt(users, acls):
            await auth.persist()
            events.emit(self.log, events.AuthSynced(master=addr, users=len(users), acls=len(acls)))

    async def _get(self, client: RemotingClient, addr: str, code: int) -> bytes:
        resp = await client.invoke(addr, RemotingCommand(code), CALL_TIMEOUT_S)
        if resp.code != ResponseCode.SUCCESS:
            raise _Refused(f"{code}: {resp.code} {resp.remark}")
        return resp.body


class _Refused(Exception):
    pass


def _differs(a: DataVersion, b: DataVersion) -> bool:
    return (a.timestamp, a.counter) != (b.timestamp, b.counter)
