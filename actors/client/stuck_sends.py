"""Unanswered sends whose broker set changed master: given up at once, not at the send timeout.

A master that hangs (SIGSTOP, a frozen VM, a full stop-the-world pause) keeps its connections
open, so a send already written to it waits for its whole ``sendMsgTimeout`` (3 s by default),
although the controller deposes the hung master and the NameServer routes its broker set to the
new master about one ``controllerHeartBeatTimeoutMills`` after the hang. Upstream's client has
the same wait (its latency-fault avoidance only steers *later* sends away from a slow broker).

`StuckSendWatch` cuts it: every send goes through `invoke`, which registers it. A send unanswered
for ``stuck_after_s`` asks for a fresh route of its topic (shared and rate limited by the
client's `RouteRefresher`, so a thousand stuck sends cost one NameServer query per topic per
100 ms), and as soon as the cached route names a *different* master address for the send's
broker set, the send is abandoned with `MasterChanged` (a `RemotingError`, so the producer's
retry loop re-sends it, to the new master or to another broker set, within what is left of the
send timeout). A route without a master (the set between two masters) is no change: the send
keeps waiting for either.

Why this keeps the contract: the abandoned request may still be stored by the old master (its
answer is dropped), so a re-sent message can be stored twice, which the at-least-once contract
allows (consumers see a duplicate with the same UNIQ_KEY). Nothing is acknowledged without an
answer from the broker that stored it: the re-send is a new request whose answer is awaited like
any other, and the old master, deposed, can no longer acknowledge (every acknowledgement needs
the SyncStateSet, which the new master leads). A merely slow master (a long fsync, a pause
shorter than the controller's heartbeat timeout) is never abandoned: its route does not change.

While a send of a broker set is stuck, new sends avoid that set if the topic has another one
(`avoid_while_stuck`: upstream's latency-fault avoidance, sendLatencyFaultEnable, applied while
the slowness lasts: the set is marked unavailable for a few polls at a time, until no send of it
is stuck or the route names its new master), so a producer of a topic spread over several sets
loses about ``stuck_after_s`` of writes to a hung master, not the detection time.

The SimpleConsumer's requests (POP, ack, change-invisible) are watched the same way, with their
own timeout: by `RequestWatch`, one loop per client that fails a request instead of cancelling
it, or, for a request that must connect first, by `invoke_watched`'s pieces.

`stuck_master_changes` is the pure decision; the watches are its thin shells.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

import attrs

from rocketrio.actors.client import backend as aio
from rocketrio.actors.kernel.remoting import RemotingError, RemotingTimeout
from rocketrio.protocol.codes import request_name
from rocketrio.protocol.remoting import RemotingCommand

STUCK_AFTER_S = 0.5  # an answer this late is not a normal send (they take milliseconds)
POLL_S = 0.1  # how often stuck sends look at their route (the refresher's own rate limit)
AVOID_S = 3 * POLL_S  # how long one mark of a stuck set lasts (renewed while it is stuck)


class MasterChanged(RemotingError):
    """The send's broker set has a new master while the send was unanswered: re-send it."""


@attrs.define(eq=False, slots=True)
class PendingSend:
    topic: str
    broker_name: str
    addr: str
    started: float
    # the call's scope when a `StuckSendWatch` gives it up by cancelling it (`invoke_watched`
    # and `RequestWatch` give their requests up themselves and need none)
    scope: aio.CancelScope | None = None
    moved_to: str | None = None  # the new master's address once the route changed
    # a `StuckSendWatch` send written at once: failed (not cancelled) when given up or when its
    # deadline passes (the watch's loop is its timer)
    call: Call | None = None
    deadline: float = math.inf
    code: int = 0


def stuck_master_changes(
    pending: Iterable[PendingSend],
    now: float,
    stuck_after_s: float,
    master_of: Callable[[str], str | None],
) -> tuple[set[str], list[tuple[PendingSend, str]]]:
    """The topics whose route stuck sends need refreshed, and the stuck sends whose broker set
    now has another master (with that master's address)."""
    topics: set[str] = set()
    moved: list[tuple[PendingSend, str]] = []
    for p in pending:
        if now - p.started < stuck_after_s or p.moved_to is not None:
            continue
        master = master_of(p.broker_name)
        if master is not None and master != p.addr:
            moved.append((p, master))
        else:
            topics.add(p.topic)
    return topics, moved


class StuckSendWatch:
    """Registers sends in flight and abandons the ones whose master changed (module docstring).

    ``invoke`` is the remoting call; ``master_of`` reads the client's cached route;
    ``refresh(topic)`` asks for a route query (non-blocking). With ``begin_nowait`` (the
    client's `ClientRemoting.begin_nowait`) a send over an open connection is written at once
    and awaited with no cancel scope: the loop fails it (`MasterChanged`, or `RemotingTimeout`
    once its deadline passed, at most ``poll_s`` late); a send that must connect first goes
    through ``invoke`` in a scope the loop cancels."""

    def __init__(
        self,
        invoke: Callable[[str, RemotingCommand, float], Awaitable[RemotingCommand]],
        master_of: Callable[[str], str | None],
        refresh: Callable[[str], object],
        *,
        begin_nowait: Callable[[str, RemotingCommand], Call | None] | None = None,
        on_stuck: Callable[[str, str], object] | None = None,
        stuck_after_s: float = STUCK_AFTER_S,
        poll_s: float = POLL_S,
    ) -> None:
        self._invoke = invoke
        self._begin_nowait = begin_nowait
        self._master_of = master_of
        self._refresh = refresh
        self._on_stuck = on_stuck
        self.stuck_after_s = stuck_after_s
        self.poll_s = poll_s
        self._pending: dict[int, PendingSend] = {}
        self._wake: aio.Event | None = None  # made in the loop by `run`
        self.abandoned = 0  # sends given up because their master changed (tests, stats)

    async def invoke(
        self, topic: str, broker_name: str, addr: str, cmd: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        """The remoting call, abandoned with `MasterChanged` when the route moves on."""
        now = aio.current_time()
        call = self._begin_nowait(addr, cmd) if self._begin_nowait is not None else None
        if call is not None:
            p = PendingSend(
                topic, broker_name, addr, now, call=call, deadline=now + timeout_s, code=cmd.code
            )
        else:
            p = PendingSend(topic, broker_name, addr, now, aio.CancelScope())
        key = id(p)
        self._pending[key] = p
        if len(self._pending) == 1 and self._wake is not None:
            self._wake.set()
        try:
            if call is not None:
                return await call.wait(math.inf)
            assert p.scope is not None
            with p.scope:
                return await self._invoke(addr, cmd, timeout_s)
        finally:
            del self._pending[key]
            if call is not None:
                call.release()
        raise master_moved(p, aio.current_time(), "send", "; re-sending")

    async def run(self) -> None:
        """The watch loop (in the producer's nursery); idle while nothing is in flight."""
        while True:
            if not self._pending:
                self._wake = wake = aio.new_event()
                await wake.wait()
            await aio.sleep(self.poll_s)
            self.check()

    def check(self) -> None:
        now = aio.current_time()
        topics, moved = stuck_master_changes(
            self._pending.values(), now, self.stuck_after_s, self._master_of
        )
        for p, master in moved:
            p.moved_to = master
            if p.call is not None:
                p.call.fail(master_moved(p, now, "send", "; re-sending"))
            elif p.scope is not None:
                p.scope.cancel()
            self.abandoned += 1
        for p in self._pending.values():
            if p.call is not None and now >= p.deadline and p.moved_to is None:
                p.call.fail(RemotingTimeout(
                    f"{request_name(p.code)} to {p.addr} timed out after "
                    f"{round(p.deadline - p.started, 3)}s"
                ))  # fmt: skip
        for topic in topics:
            self._refresh(topic)
        if self._on_stuck is not None:
            for p in self._pending.values():
                if p.moved_to is None and now - p.started >= self.stuck_after_s:
                    self._on_stuck(p.broker_name, p.addr)


def avoid_while_stuck(
    available: Callable[[str], bool],
    mark_unavailable: Callable[[str, float, float, str | None], None],
    hold_s: float = AVOID_S,
) -> Callable[[str, str], None]:
    """The watch's ``on_stuck`` for a producer: mark the set unavailable for ``hold_s`` (until
    its master address changes, `FaultTracker`), unless it already is (a failure's longer
    isolation is never shortened)."""

    def on_stuck(broker_name: str, addr: str) -> None:
        if available(broker_name):
            mark_unavailable(broker_name, aio.current_time(), hold_s, addr)

    return on_stuck


def timed_out(cmd: RemotingCommand, pending: PendingSend, timeout_s: float) -> RemotingTimeout:
    return RemotingTimeout(
        f"{request_name(cmd.code)} to {pending.addr} timed out after {timeout_s}s"
    )


def master_moved(
    pending: PendingSend, now: float, what: str = "request", then: str = ""
) -> MasterChanged:
    return MasterChanged(
        f"the master of {pending.broker_name} moved from {pending.addr} to {pending.moved_to} "
        f"while the {what} was unanswered for {now - pending.started:.2f}s{then}"
    )


class Call(Protocol):
    """A request written and not yet answered (the client's `remoting.InFlight`)."""

    @property
    def done(self) -> bool:
        """Its answer is there."""

    async def wait(self, timeout: float) -> RemotingCommand:
        """The answer (at once, when `done`); `aio.WaitTimeout` (the request stays pending) if
        none within ``timeout``."""

    def fail(self, exc: BaseException) -> None:
        """End the wait with ``exc`` unless the answer is there."""

    def release(self) -> None:
        """Forget the request (a later answer is dropped)."""


async def invoke_watched(
    begin: Callable[[str, RemotingCommand], Awaitable[Call]],
    master_of: Callable[[str], str | None],
    refresh: Callable[[str], object],
    pending: PendingSend,
    cmd: RemotingCommand,
    timeout_s: float,
    *,
    stuck_after_s: float,
    poll_s: float = POLL_S,
) -> RemotingCommand:
    """One call watched on its own, without a `StuckSendWatch` loop (the SimpleConsumer's POP,
    ack and change-invisible requests, whose consumer may run in no nursery of its own): once
    unanswered for ``stuck_after_s`` it asks for ``pending.topic``'s route every ``poll_s`` and
    is given up with `MasterChanged` as soon as the route names another master of
    ``pending.broker_name``; past ``timeout_s`` with no answer it fails with `RemotingTimeout`.
    A long poll passes its await as part of ``stuck_after_s``: the broker answers it by then,
    so only a hung broker or network is later.

    No task of its own: ``begin`` writes the request (connecting first if need be; that wait is
    watched too) and the answer is awaited in pieces, each ending where the route is next
    looked at. An answer in time costs one wait in one timeout scope."""
    deadline = aio.current_time() + timeout_s
    look_at = min(pending.started + stuck_after_s, deadline)
    call: Call | None = None
    try:
        while True:
            with aio.move_on_at(look_at):  # the one timeout scope of each piece
                if call is None:
                    call = await begin(pending.addr, cmd)
                return await call.wait(math.inf)
            if call is not None and call.done:  # answered as the scope ended
                return await call.wait(0.0)
            now = aio.current_time()
            if now >= deadline:
                raise timed_out(cmd, pending, timeout_s)
            topics, moved = stuck_master_changes((pending,), now, stuck_after_s, master_of)
            if moved:
                pending.moved_to = moved[0][1]
                raise master_moved(pending, now)
            for topic in topics:
                refresh(topic)
            look_at = min(now + poll_s, deadline)
    finally:
        if call is not None:
            call.release()


@attrs.define(eq=False, slots=True)
class Watched:
    """One request in a `RequestWatch`."""

    call: Call
    cmd: RemotingCommand
    pending: PendingSend
    deadline: float
    stuck_after_s: float
    timeout_s: float


class RequestWatch:
    """The watched requests of one client (the SimpleConsumer's POP, ack and change-invisible
    requests), looked at by one loop in the client's task group instead of a timeout scope per
    request: each ``poll_s`` while any is in flight, a request unanswered ``stuck_after_s``
    asks for its topic's route and is failed with `MasterChanged` once the route names another
    master of its broker set, and one past its deadline is failed with `RemotingTimeout` (each
    at most ``poll_s`` late). `invoke` falls back to `invoke_watched`'s scoped pieces when the
    request cannot be written at once (no open connection: the connect is watched there)."""

    def __init__(
        self,
        master_of: Callable[[str], str | None],
        refresh: Callable[[str], object],
        spawn: Callable[[Callable[[], Awaitable[None]]], object],
        *,
        poll_s: float = POLL_S,
    ) -> None:
        self._master_of = master_of
        self._refresh = refresh
        self._spawn = spawn
        self.poll_s = poll_s
        self._watched: dict[int, Watched] = {}
        self._wake: aio.Event | None = None
        self._running = False

    def __len__(self) -> int:
        return len(self._watched)

    async def invoke(
        self,
        begin_nowait: Callable[[str, RemotingCommand], Call | None],
        begin: Callable[[str, RemotingCommand], Awaitable[Call]],
        pending: PendingSend,
        cmd: RemotingCommand,
        timeout_s: float,
        *,
        stuck_after_s: float,
    ) -> RemotingCommand:
        """The request at ``pending.addr``, watched (class docstring)."""
        call = begin_nowait(pending.addr, cmd)
        if call is None:
            return await invoke_watched(
                begin, self._master_of, self._refresh, pending, cmd, timeout_s,
                stuck_after_s=stuck_after_s, poll_s=self.poll_s,
            )  # fmt: skip
        w = Watched(call, cmd, pending, pending.started + timeout_s, stuck_after_s, timeout_s)
        key = id(w)
        self._watched[key] = w
        if not self._running:
            self._running = True
            self._spawn(self.run)
        elif self._wake is not None:
            self._wake.set()
            self._wake = None
        try:
            return await call.wait(math.inf)
        finally:
            del self._watched[key]
            call.release()

    async def run(self) -> None:
        """The loop: idle while nothing is watched, a look every ``poll_s`` otherwise."""
        try:
            while True:
                if not self._watched:
                    self._wake = wake = aio.new_event()
                    await wake.wait()
                await aio.sleep(self.poll_s)
                self.check(aio.current_time())
        finally:
            self._running = False
            self._wake = None

    def check(self, now: float) -> None:
        """Fail what is past its deadline or whose master moved; ask for the stuck ones'
        routes (each topic once)."""
        stuck: list[Watched] = []
        for w in self._watched.values():
            if w.call.done:
                continue
            if now >= w.deadline:
                w.call.fail(timed_out(w.cmd, w.pending, w.timeout_s))
            elif now - w.pending.started >= w.stuck_after_s:
                stuck.append(w)
        topics: set[str] = set()
        for w in stuck:
            t, moved = stuck_master_changes((w.pending,), now, w.stuck_after_s, self._master_of)
            if moved:
                w.pending.moved_to = moved[0][1]
                w.call.fail(master_moved(w.pending, now))
            topics |= t
        for topic in topics:
            self._refresh(topic)
