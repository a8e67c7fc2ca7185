"""Pre-online (RIP-32 BrokerPreOnlineService, SPEC A4): a returning classic master stays off the
NameServers, and runs no special service, until it has its slaves' newer progress.

While its master was down a slave acted for it: consumers committed offsets to it, its delay and
timer scans and transaction/POP rounds moved their offsets (all kept as consumer offsets and
delayOffset.json). A master that simply came back and registered would be routed at once with
its older tables, and slave sync would then copy them over the slave's: offsets move backwards,
consumers re-read, delays re-fire. So, before going online (every `RETRY_S` until done):

1. the group's live members (GET_BROKER_MEMBER_GROUP, or the compat route), without
   registering; no slave alive: online at once;
2. for each slave in id order (progress kept across retries): EXCHANGE_BROKER_HA_INFO pushing
   this master's HA address, address and max offset: the slave follows it and stops acting
   (acting_core.py's hold), so its offsets stop moving before they are read;
3. wait up to `HA_WAIT_S` for that slave's HA connection in transfer, matched by host AND
   brokerId (upstream matches the host only, which confuses two members on one host; the HA
   socket's port is ephemeral, so the brokerId from the handshake stands in for it);
4. pull its consumer offsets (GET_ALL_CONSUMER_OFFSET 43) and delay/timer offsets
   (GET_ALL_DELAY_OFFSET 45, the timer wheel's checkpoint travels in it) and take the PER-QUEUE
   MAXIMUM of each (upstream adopts whole tables when the slave's DataVersion is newer, which
   rolls back any queue the master was ahead on); the DataVersions are logged, and ours moves
   to the newer one so the NameServers and slaves see the change;
5. all slaves done: online (register, heartbeat, special services).

Then, for `REVERSE_SYNC_S` after going online, the master keeps taking the slaves' per-queue
maxima every `REVERSE_SYNC_PERIOD_S`: clients still routed to the slave commit there until
their route refresh (pollNameServerInterval, 30 s), which upstream's master never sees.

A consumer offset reset backwards (admin resetOffset) made during that window on the master may
be undone by a slave's higher offset: maxima cannot tell a reset from a stale copy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.failover.member_group import fetch_member_group, request
from rocketrio.actors.broker.tables.consumer_offset import ConsumerOffsetManager
from rocketrio.actors.broker.tables.delay_offset import (
    DelayOffsetSerializeWrapper,
    DelayOffsetTable,
)
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import ConsumerOffsetSerializeWrapper, DataVersion
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import ExchangeHAInfoRequestHeader
from rocketrio.protocol.serde import HeaderError, from_json

MASTER_ID = 0
RETRY_S = 1.0  # upstream: the service retries every second
HA_WAIT_S = 10.0  # upstream: up to 10 s for the slave's HA connection
REVERSE_SYNC_S = 40.0  # a client's route refresh (30 s) and some
REVERSE_SYNC_PERIOD_S = 5.0
CALL_TIMEOUT_S = 3.0

HALinks = Callable[[], list[tuple[str, int | None, int]]]  # (peer host, slave id, transfer_from)


def merge_offsets(mine: dict[str, dict[int, int]], theirs: Mapping[str, Mapping[int, int]]) -> int:
    """Raise each of our consumer offsets to the slave's where it is higher; how many rose."""
    raised = 0
    for key, queues in theirs.items():
        ours = mine.setdefault(key, {})
        for qid, offset in queues.items():
            if offset > ours.get(qid, -1):
                ours[qid] = offset
                raised += 1
    return raised


def merge_delay(table: DelayOffsetTable, theirs: DelayOffsetSerializeWrapper) -> int:
    """Raise each delay level's and timer queue's offset to the slave's; how many rose."""
    raised = merge_offsets(
        {"levels": table.levels, "timers": table.timers},
        {"levels": theirs.offsetTable, "timers": theirs.timerOffsetTable},
    )
    if raised:
        table.dirty = True
    return raised


def newer(a: DataVersion, b: DataVersion) -> DataVersion:
    """The later of two DataVersions (stateVersion, then counter, then timestamp)."""
    key_a = (a.stateVersion, a.counter, a.timestamp)
    return a if key_a >= (b.stateVersion, b.counter, b.timestamp) else b


def link_ready(links: list[tuple[str, int | None, int]], addr: str, broker_id: int) -> bool:
    """That member's HA connection is in transfer: same host, same brokerId, first ack done."""
    host = addr.rsplit(":", 1)[0]
    return any(
        peer.rsplit(":", 1)[0] == host and sid == broker_id and transfer >= 0
        for peer, sid, transfer in links
    )


class PreOnlineService:
    """Run by the classic role service of a returning master (module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        offsets: ConsumerOffsetManager,
        delay: DelayOffsetTable,
        max_offset: Callable[[], Awaitable[int]],
        ha_links: HALinks,
        addr: Callable[[], str],
    ) -> None:
        self.config = config
        self.offsets = offsets
        self.delay = delay
        self.max_offset = max_offset
        self.ha_links = ha_links
        self.addr = addr
        self.done: set[int] = set()
        self.raised = 0
        self.log = structlog.get_logger("broker").bind(actor="pre_online")

    async def run(self, client: RemotingClient) -> None:
        """Return once online may begin (every slave alive at the time synced)."""
        while True:
            members = await fetch_member_group(
                client, self.config, compatible=self.config.compatibleWithOldNameSrv
            )
            if members is not None and await self._sync_all(client, members):
                break
            await trio.sleep(RETRY_S)
        events.emit(
            self.log,
            events.PreOnlineDone(slaves=sorted(self.done), raised=self.raised),
        )

    async def reverse_sync(self, client: RemotingClient) -> None:
        """After going online: keep taking the slaves' maxima for REVERSE_SYNC_S."""
        with trio.move_on_after(REVERSE_SYNC_S):
            while True:
                await trio.sleep(REVERSE_SYNC_PERIOD_S)
                members = await fetch_member_group(
                    client, self.config, compatible=self.config.compatibleWithOldNameSrv
                )
                for bid, addr in sorted((members or {}).items()):
                    if bid not in (MASTER_ID, self.config.brokerId):  # a returning slave's own
                        await self.pull(client, addr)

    async def _sync_all(self, client: RemotingClient, members: dict[int, str]) -> bool:
        for bid, addr in sorted(members.items()):
            if bid == MASTER_ID or bid in self.done:
                continue
            if not await self._sync_one(client, bid, addr):
                return False
            self.done.add(bid)
        return True

    async def _sync_one(self, client: RemotingClient, bid: int, addr: str) -> bool:
        max_offset = await self.max_offset()
        push = ExchangeHAInfoRequestHeader(
            masterHaAddress=self.config.ha_addr,
            masterFlushOffset=max_offset,
            masterAddress=self.addr(),
        )
        try:
            resp = await client.invoke(
                addr, request(RequestCode.EXCHANGE_BROKER_HA_INFO, push), CALL_TIMEOUT_S
            )
        except RemotingError:
            return False
        if resp.code != ResponseCode.SUCCESS:
            return False
        with trio.move_on_after(HA_WAIT_S):
            while not link_ready(self.ha_links(), addr, bid):
                await trio.sleep(0.1)
        if not link_ready(self.ha_links(), addr, bid):
            return False
        return await self.pull(client, addr)

    async def pull(self, client: RemotingClient, addr: str) -> bool:
        """Take the slave's per-queue maxima of consumer and delay offsets (also a returning
        slave's, from the slave acting: slave_pre_online.py); False when a call failed."""
        try:
            co = await self._get(client, addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
            do = await self._get(client, addr, RequestCode.GET_ALL_DELAY_OFFSET)
            theirs = from_json(ConsumerOffsetSerializeWrapper, co)
            their_delay = from_json(DelayOffsetSerializeWrapper, do)
        except (RemotingError, HeaderError):
            return False
        raised = merge_offsets(self.offsets.table, theirs.offsetTable)
        if raised:
            self.offsets.dirty = True
            self.offsets.data_version = newer(self.offsets.data_version, theirs.dataVersion)
        raised_delay = merge_delay(self.delay, their_delay)
        if raised_delay:
            self.delay.data_version = newer(self.delay.data_version, their_delay.dataVersion)
        self.raised += raised + raised_delay
        events.emit(
            self.log,
            events.PreOnlineSynced(
                slave=addr,
                offsets_raised=raised,
                delay_offsets_raised=raised_delay,
                slave_offset_version=theirs.dataVersion.counter,
            ),
        )
        return True

    async def _get(self, client: RemotingClient, addr: str, code: int) -> bytes:
        resp = await client.invoke(addr, request(code, None), CALL_TIMEOUT_S)
        if resp.code != ResponseCode.SUCCESS:
            raise RemotingError(f"code {code} from {addr}: {resp.code} {resp.remark or ''}")
        return resp.body
