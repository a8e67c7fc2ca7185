"""POP on a slave acting for its dead master (RIP-32, SPEC A1/A3): its CK / ACK records escape to
one pinned master of another group (`PopRecordEscape`, store/escape_bridge.py), and that master's
revive reads the popped messages back from the acting group (`read_foreign`).

Who writes where (pop_pins.py decides): a new CK is pinned to a live master of another group and
written there at once (the pop returns its messages and moves the group's offset only once it
was stored, as on a master); every ACK and CHANGE_INVISIBLE_TIME of the same message is queued
here and written to that same master in the background, retried every `retry_s` until stored
(never skipped; the ACK's caller hears SUCCESS once it is stored), so the connection that sent it
keeps reading requests meanwhile. At most `capacity` such jobs wait; beyond, the ACK is refused
(the client may retry; unacked, the message is revived once: at-least-once).

The masters: in a broker container its serving masters of other groups (in-process,
`LocalTarget`), else with enableRemoteEscape the writable masters of other groups that the route
of the cluster-name topic lists (SEND_MESSAGE_V2 to the revive queue itself).

The pinned master revives a CK whose brokerName is another group's (here: the acting slave's) by
pulling the messages from that group's routed id 0 (the acting slave, or its master once back);
a failed pull is "try again next round", never "gone" (upstream #8460).

Once the slave stops acting (its master is back) it keeps forwarding the ACK and
CHANGE_INVISIBLE_TIME records of the CKs it pinned (`PinnedOnly`): clients whose route still
names it send them there until their route refresh, and written on the pinned master they still
cancel.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import structlog
import trio

from rocketrio.actors.broker.failover.escape import EscapeTarget, LocalTarget, RemoteEscape
from rocketrio.actors.broker.failover.pop_pins import PopPins
from rocketrio.actors.broker.store.queue_reader import QueueReadUnavailable
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.filter import EXPRESSION_TAG, SUB_ALL
from rocketrio.protocol.headers import PULL_FLAG_SUBSCRIPTION, PullMessageRequestHeader
from rocketrio.protocol.message import decode_stored
from rocketrio.protocol.pop_checkpoint import MergeKey
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.storage.store_types import MessageToStore

CAPACITY = 10_000
RETRY_S = 1.0
WRITERS_TTL_S = 1.0


@attrs.define
class _Job:
    key: MergeKey
    msgs: list[MessageToStore]
    on_stored: Callable[[], None]
    acked: int
    new_key: MergeKey | None
    attempts: int = 0


Writer = Callable[[list[MessageToStore]], Awaitable[str | None]]


class PopEscaper:
    """`PopRecordEscape` of one broker (module docstring)."""

    def __init__(
        self,
        own_group: str,
        *,
        local: Callable[[], list[LocalTarget]] | None = None,
        remote: RemoteEscape | None = None,
        log: Any = None,
        capacity: int = CAPACITY,
        retry_s: float = RETRY_S,
    ) -> None:
        self.pins = PopPins(own_group)
        self.local = local
        self.remote = remote
        self.log = log or structlog.get_logger("pop_escape")
        self.capacity = capacity
        self.retry_s = retry_s
        self._jobs: deque[_Job] = deque()
        self._wake = trio.Event()
        self._addrs: dict[str, str] = {}  # remote masters seen, kept for their pinned records
        self.written: dict[str, int] = {}  # records stored per master
        self._writers_cache: tuple[float, dict[str, Writer]] | None = None

    @property
    def queued(self) -> int:
        return len(self._jobs)

    async def _writers(self) -> dict[str, Writer]:
        """The live masters of other groups now, each with how to write to it (asked of the
        NameServers at most once per `WRITERS_TTL_S`, not once per record)."""
        now = trio.current_time()
        if self._writers_cache is not None and now - self._writers_cache[0] < WRITERS_TTL_S:
            return self._writers_cache[1]
        out: dict[str, Writer] = {}
        if self.remote is not None:
            found = await self.remote.live_masters()
            if not isinstance(found, str):
                self._addrs.update(found)
                for name, addr in found.items():
                    out[name] = self._remote_writer(name, addr)
        for target in self.local() if self.local is not None else []:
            if target.broker_name != self.pins.own_group:
                out[target.broker_name] = target.put  # in-process first (it replaces remote)
        self._writers_cache = (now, out)
        return out

    def _remote_writer(self, name: str, addr: str) -> Writer:
        remote = self.remote
        assert remote is not None

        async def write(msgs: list[MessageToStore]) -> str | None:
            for msg in msgs:
                error = await remote.send_to(EscapeTarget(name, addr, msg.queue_id), msg)
                if error is not None:
                    return error
            return None

        return write

    async def _write(
        self, key: MergeKey, msgs: list[MessageToStore]
    ) -> tuple[str | None, str | None]:
        """Write ``msgs`` to ``key``'s master: (that master, None once stored, else why not)."""
        writers = await self._writers()
        master = self.pins.target(key, list(writers))
        if master is None:
            return None, "no live master of another group to keep POP records"
        writer = writers.get(master)
        if writer is None and master in self._addrs:  # pinned, no longer listed: try it still
            writer = self._remote_writer(master, self._addrs[master])
        if writer is None:
            return master, f"the pinned master {master} is not reachable now"
        error = await writer(msgs)
        if error is None:
            self.written[master] = self.written.get(master, 0) + len(msgs)
        else:
            self._writers_cache = None  # ask the NameServers again on the next try
        return master, error

    async def put_ck(self, key: MergeKey, num: int, msg: MessageToStore) -> str | None:
        master, error = await self._write(key, [msg])
        if master is None or error is not None:
            return error
        self.pins.pin(key, master, num)
        return None

    def submit(
        self,
        key: MergeKey,
        msgs: list[MessageToStore],
        on_stored: Callable[[], None],
        *,
        acked: int,
        new_key: MergeKey | None = None,
    ) -> str | None:
        if len(self._jobs) >= self.capacity:
            return f"{len(self._jobs)} POP records are waiting for their master; retry later"
        self._jobs.append(_Job(key, msgs, on_stored, acked, new_key))
        self._wake.set()
        return None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            if not self._jobs:
                await self._wake.wait()
                self._wake = trio.Event()
                continue
            if not await self.write_round():
                await trio.sleep(self.retry_s)

    async def write_round(self) -> bool:
        """Try every queued job once, in order; a failed one goes to the back. True when every
        job of the round was stored."""
        all_stored = True
        for _ in range(len(self._jobs)):
            job = self._jobs.popleft()
            master, error = await self._write(job.key, job.msgs)
            if master is not None and error is None:
                if job.new_key is not None:  # CHANGE_INVISIBLE_TIME's new CK: same master
                    self.pins.pin(job.new_key, master, 1)
                self.pins.acked(job.key, job.acked)
                job.on_stored()
                continue
            all_stored = False
            job.attempts += 1
            self._jobs.append(job)
            if job.attempts & (job.attempts - 1) == 0:  # 1, 2, 4, 8 ...
                events.emit(
                    self.log,
                    events.PopRecordEscapeFailed(
                        master=master, records=len(job.msgs), attempts=job.attempts,
                        error=error or "not stored",
                    ),
                )  # fmt: skip
        return all_stored


class PinnedOnly:
    """A slave that stopped acting (its master is back) but still holds pins: ACKs of the pops
    it served that clients with a stale route still send it go on to their pinned master; any
    other POP record is refused, as a slave's store would."""

    def __init__(self, escaper: PopEscaper) -> None:
        self.escaper = escaper

    async def put_ck(self, key: MergeKey, num: int, msg: MessageToStore) -> str | None:
        return "this slave no longer acts for its master: pop from the master"

    def submit(
        self,
        key: MergeKey,
        msgs: list[MessageToStore],
        on_stored: Callable[[], None],
        *,
        acked: int,
        new_key: MergeKey | None = None,
    ) -> str | None:
        if self.escaper.pins.pinned(key) is None:
            return "this slave no longer acts for its master and popped no such message"
        return self.escaper.submit(key, msgs, on_stored, acked=acked, new_key=new_key)


Call = Callable[[str, str, int, Any], Awaitable[RemotingCommand | str]]


class ForeignReader:
    """The pinned master's read of a message another group's acting slave popped (module
    docstring): one PULL_MESSAGE to that group's routed id 0 (found through the route of the
    cluster-name topic). ``call(broker_name, route_topic, code, header)`` answers the response or
    why no call could be made."""

    def __init__(self, cluster: str, call: Call, group: str = "TOOLS_CONSUMER") -> None:
        self.cluster = cluster
        self.call = call
        self.group = group
        self.reads = 0

    async def read(
        self, broker_name: str, topic: str, queue_id: int, offset: int, max_bytes: int
    ) -> list[bytes]:
        """The stored record at ``offset`` (empty when that group no longer has it); raises
        `QueueReadUnavailable` when the group could not be asked."""
        h = PullMessageRequestHeader(
            self.group, topic, queue_id, offset, 1, PULL_FLAG_SUBSCRIPTION, -1, 0, 0, SUB_ALL,
            EXPRESSION_TAG, max_bytes, broker_name, lo=False,
        )  # fmt: skip
        resp = await self.call(broker_name, self.cluster, RequestCode.PULL_MESSAGE, h)
        if isinstance(resp, str):
            raise QueueReadUnavailable(resp)
        self.reads += 1
        if resp.code == ResponseCode.SUCCESS:
            records = split_records(resp.body)[:1]
            # only that very message: a read that answers another offset is no answer
            return [r for r in records if decode_stored(r)[0].queue_offset == offset]
        if resp.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED):
            return []  # not in that group's store (retention, or a tail the master lost)
        raise QueueReadUnavailable(f"{broker_name}: pull answered {resp.code} {resp.remark}")


def split_records(body: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(body):
        _, end = decode_stored(body, pos)
        out.append(body[pos:end])
        pos = end
    return out
