"""The producer's stuck-send watch (actors/client/stuck_sends.py) on a mock clock: a hung call
is given up one poll after the route names another master; a slow one of the same master is
awaited, its set avoided by new sends while it is stuck."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.queue_select import FaultTracker
from rocketrio.actors.client.stuck_sends import (
    AVOID_S,
    POLL_S,
    MasterChanged,
    PendingSend,
    RequestWatch,
    StuckSendWatch,
    avoid_while_stuck,
    invoke_watched,
)
from rocketrio.actors.kernel.remoting import RemotingError, RemotingTimeout
from rocketrio.protocol.remoting import RemotingCommand

OLD, NEW = "10.0.0.1:10911", "10.0.0.2:10911"


async def test_the_watch_abandons_the_hung_call_once_the_route_moves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The shell: a call that never answers ends with MasterChanged (a RemotingError, so the
    producer retries it) one poll after the route names the new master, long before its own
    timeout; until then the watch only asks for route refreshes."""
    route = {"broker-a": OLD}
    refreshed: list[str] = []

    async def hung(_addr: str, _cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        await trio.sleep(timeout_s)
        raise RemotingError("timeout")

    watch = StuckSendWatch(hung, route.get, refreshed.append)
    async with trio.open_nursery() as n:
        n.start_soon(watch.run)

        n.start_soon(master_moves, route, 1.0)
        t0 = trio.current_time()
        with pytest.raises(MasterChanged) as e:
            await watch.invoke("T", "broker-a", OLD, RemotingCommand(code=10), 3.0)
        assert isinstance(e.value, RemotingError)
        assert 1.0 <= trio.current_time() - t0 <= 1.0 + watch.poll_s + 1e-9
        assert refreshed and set(refreshed) == {"T"}  # asked while stuck (0.5 s .. 1.0 s)
        assert watch.abandoned == 1
        n.cancel_scope.cancel()


async def test_a_slow_answer_from_the_same_master_is_awaited(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow(_addr: str, cmd: RemotingCommand, _timeout_s: float) -> RemotingCommand:
        await trio.sleep(2.0)
        return cmd

    watch = StuckSendWatch(slow, lambda _b: OLD, lambda _t: None)
    async with trio.open_nursery() as n:
        n.start_soon(watch.run)
        cmd = RemotingCommand(code=10)
        assert await watch.invoke("T", "broker-a", OLD, cmd, 3.0) is cmd
        assert watch.abandoned == 0
        n.cancel_scope.cancel()


async def test_a_stuck_set_is_avoided_while_it_is_stuck(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Latency-fault avoidance while a send is stuck: the set is marked unavailable from
    ``stuck_after_s`` on, for a few polls at a time, and free again soon after the call ends;
    an isolation already in place (a failed send's 30 s) is never shortened."""
    faults = FaultTracker()
    marks: list[float] = []

    def mark(name: str, now: float, hold_s: float, addr: str | None) -> None:
        marks.append(now)
        faults.mark_unavailable(name, now, hold_s, addr)

    def available(name: str) -> bool:
        return faults.is_available(name, trio.current_time(), OLD)

    async def slow(_addr: str, cmd: RemotingCommand, _timeout_s: float) -> RemotingCommand:
        await trio.sleep(1.5)
        return cmd

    watch = StuckSendWatch(slow, lambda _b: OLD, lambda _t: None,
                           on_stuck=avoid_while_stuck(available, mark))  # fmt: skip
    async with trio.open_nursery() as n:
        n.start_soon(watch.run)
        t0 = trio.current_time()

        async def probe() -> None:
            await trio.sleep(0.3)
            assert available("broker-a")  # not stuck yet
            await trio.sleep(0.35)
            assert not available("broker-a")  # stuck since 0.5 s
            await trio.sleep(0.7)
            assert not available("broker-a")  # still stuck at 1.35 s

        n.start_soon(probe)
        await watch.invoke("T", "broker-a", OLD, RemotingCommand(code=10), 3.0)
        await trio.sleep(AVOID_S + 0.01)
        assert available("broker-a")  # answered: the set is used again within one hold
        assert marks and min(marks) - t0 >= watch.stuck_after_s
        faults.mark_unavailable("broker-a", trio.current_time(), 30.0, OLD)  # a real failure
        avoid_while_stuck(available, mark)("broker-a", OLD)
        assert not faults.is_available("broker-a", trio.current_time() + 29.0, OLD)
        n.cancel_scope.cancel()


async def master_moves(route: dict[str, str], after_s: float) -> None:
    """The route names the new master of broker-a ``after_s`` from now."""
    await trio.sleep(after_s)
    route["broker-a"] = NEW


def pending(addr: str = OLD) -> PendingSend:
    return PendingSend("T", "broker-a", addr, trio.current_time())


class FakeCall:
    """A written request (`remoting.InFlight`'s shape): answered when ``reply`` is set."""

    def __init__(self) -> None:
        self.reply: aio.Reply[RemotingCommand] = aio.Reply()
        self.released = False

    @property
    def done(self) -> bool:
        return self.reply.done

    async def wait(self, timeout: float) -> RemotingCommand:
        if self.reply.done:
            return self.reply.result()
        return await self.reply.wait(timeout)

    def fail(self, exc: BaseException) -> None:
        self.reply.fail(exc)

    def release(self) -> None:
        self.released = True


def begin_with(
    calls: list[FakeCall], answer_after: float | None = None, nursery: trio.Nursery | None = None
) -> Callable[[str, RemotingCommand], Awaitable[FakeCall]]:
    """A ``begin`` that records its calls; each answered with its own command after
    ``answer_after`` seconds (never when None)."""

    async def begin(_addr: str, cmd: RemotingCommand) -> FakeCall:
        call = FakeCall()
        calls.append(call)
        if answer_after is not None:
            assert nursery is not None

            async def answer() -> None:
                await trio.sleep(answer_after)
                call.reply.set(cmd)

            nursery.start_soon(answer)
        return call

    return begin


async def test_a_watched_long_poll_is_given_up_once_the_route_moves_after_its_await(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """`invoke_watched` (the SimpleConsumer's POP): no route query while the long poll may
    legitimately be held (its await), then a query every poll, and MasterChanged one poll after
    the route names the new master, long before the call's own timeout; the request is
    released (its late answer dropped)."""
    route = {"broker-a": OLD}
    refreshed: list[float] = []
    calls: list[FakeCall] = []

    async with trio.open_nursery() as n:
        n.start_soon(master_moves, route, 3.0)
        t0 = trio.current_time()
        with pytest.raises(MasterChanged):
            await invoke_watched(
                begin_with(calls),
                route.get,
                lambda _t: refreshed.append(trio.current_time() - t0),
                pending(),
                RemotingCommand(code=200050),
                5.0,
                stuck_after_s=2.5,
            )
        assert 3.0 <= trio.current_time() - t0 <= 3.0 + 0.1 + 1e-9
        assert refreshed and min(refreshed) >= 2.5  # nothing asked during the await
        assert len(refreshed) == 5  # one a poll: 2.5, 2.6, .. 2.9
        assert len(calls) == 1 and calls[0].released


async def test_a_hung_connect_is_watched_too(autojump_clock: trio.testing.MockClock) -> None:
    """A ``begin`` that never returns (the connect to a hung host) is given up like a hung
    answer once the route moves; the request never written is nothing to release."""
    route = {"broker-a": OLD}

    async def hung_connect(_addr: str, _cmd: RemotingCommand) -> FakeCall:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with trio.open_nursery() as n:
        n.start_soon(master_moves, route, 1.0)
        t0 = trio.current_time()
        with pytest.raises(MasterChanged), trio.fail_after(10):
            await invoke_watched(
                hung_connect, route.get, lambda _t: None, pending(), RemotingCommand(code=200050),
                3.0, stuck_after_s=0.5,
            )  # fmt: skip
        assert 1.0 <= trio.current_time() - t0 <= 1.0 + 0.1 + 1e-9


async def test_a_watched_call_returns_its_answer_or_raises_its_own_error_unwrapped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def refuse(_addr: str, _cmd: RemotingCommand) -> FakeCall:
        raise RemotingError("connection refused")

    calls: list[FakeCall] = []
    cmd = RemotingCommand(code=200050)
    async with trio.open_nursery() as n:
        # past stuck_after_s: the route did not move, so it is awaited
        t0 = trio.current_time()
        got = await invoke_watched(
            begin_with(calls, 1.0, n), lambda _b: OLD, lambda _t: None, pending(), cmd, 3.0,
            stuck_after_s=0.5,
        )  # fmt: skip
        assert got is cmd and trio.current_time() - t0 == pytest.approx(1.0)
        assert calls[0].released
    with pytest.raises(RemotingError, match="refused"):
        await invoke_watched(
            refuse, lambda _b: OLD, lambda _t: None, pending(), cmd, 3.0, stuck_after_s=0.5
        )


async def test_a_watched_call_unanswered_by_its_deadline_times_out_there(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The route never moves and no answer comes: `RemotingTimeout` (a `RemotingError`) at the
    call's own timeout, not a poll later, and the request released."""
    calls: list[FakeCall] = []
    t0 = trio.current_time()
    with pytest.raises(RemotingTimeout, match=r"timed out after 3\.05s"):
        await invoke_watched(
            begin_with(calls), lambda _b: OLD, lambda _t: None, pending(), RemotingCommand(code=51),
            3.05, stuck_after_s=0.5,
        )  # fmt: skip
    assert trio.current_time() - t0 == pytest.approx(3.05)
    assert calls[0].released


async def test_an_answer_there_as_the_wait_ends_wins(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An answer that arrives as a piece's scope ends the wait is returned, even though the
    route names another master by then: the request was answered, nothing to give up."""
    cmd = RemotingCommand(code=200051)

    class AnsweredAsCancelled(FakeCall):
        async def wait(self, timeout: float) -> RemotingCommand:
            if self.reply.done:
                return self.reply.result()
            try:
                await trio.sleep_forever()
            finally:
                self.reply.set(cmd)
            raise AssertionError("unreachable")

    async def begin(_addr: str, _cmd: RemotingCommand) -> FakeCall:
        return AnsweredAsCancelled()

    got = await invoke_watched(
        begin, lambda _b: NEW, lambda _t: None, pending(), cmd, 3.0, stuck_after_s=0.5
    )
    assert got is cmd


def nowait_with(calls: list[FakeCall]) -> Callable[[str, RemotingCommand], FakeCall]:
    """A ``begin_nowait`` over an open connection: each request written at once, unanswered
    until the test sets its reply."""

    def begin_nowait(_addr: str, _cmd: RemotingCommand) -> FakeCall:
        calls.append(FakeCall())
        return calls[-1]

    return begin_nowait


async def no_begin(_addr: str, _cmd: RemotingCommand) -> FakeCall:
    raise AssertionError("the shared watch's request needs no connect")


async def test_the_shared_watch_gives_a_hung_request_up_once_the_route_moves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """`RequestWatch` (one loop for a client's SimpleConsumer requests): a request unanswered
    past ``stuck_after_s`` asks for its topic's route each poll and is failed with
    MasterChanged within a poll of the route naming another master; released, out of the
    watch."""
    route = {"broker-a": OLD}
    refreshed: list[float] = []
    calls: list[FakeCall] = []
    async with trio.open_nursery() as n:
        watch = RequestWatch(
            route.get, lambda _t: refreshed.append(trio.current_time() - t0), n.start_soon
        )

        n.start_soon(master_moves, route, 1.0)
        t0 = trio.current_time()
        with pytest.raises(MasterChanged), trio.fail_after(10):
            await watch.invoke(
                nowait_with(calls), no_begin, pending(), RemotingCommand(code=51), 3.0,
                stuck_after_s=0.5,
            )  # fmt: skip
        assert 1.0 <= trio.current_time() - t0 <= 1.0 + POLL_S + 1e-9
        assert refreshed and 0.5 <= min(refreshed) <= 0.5 + POLL_S + 1e-9
        assert calls[0].released and len(watch) == 0
        n.cancel_scope.cancel()


async def test_the_shared_watch_times_a_request_out_within_a_poll_of_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[FakeCall] = []
    async with trio.open_nursery() as n:
        watch = RequestWatch(lambda _b: OLD, lambda _t: None, n.start_soon)
        t0 = trio.current_time()
        with pytest.raises(RemotingTimeout, match=r"timed out after 3\.0s"), trio.fail_after(10):
            await watch.invoke(
                nowait_with(calls), no_begin, pending(), RemotingCommand(code=51), 3.0,
                stuck_after_s=0.5,
            )  # fmt: skip
        assert 3.0 <= trio.current_time() - t0 <= 3.0 + POLL_S + 1e-9
        assert calls[0].released and len(watch) == 0
        n.cancel_scope.cancel()


async def test_an_answer_is_returned_and_the_idle_shared_watch_wakes_for_the_next(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An answered request returns its answer; the loop, idle once nothing is in flight, looks
    again as soon as the next request is watched."""
    calls: list[FakeCall] = []
    route = {"broker-a": OLD}
    cmd = RemotingCommand(code=51)
    async with trio.open_nursery() as n:
        watch = RequestWatch(route.get, lambda _t: None, n.start_soon)

        async def answer_first() -> None:
            await trio.sleep(0.2)
            calls[0].reply.set(cmd)

        n.start_soon(answer_first)
        assert await watch.invoke(nowait_with(calls), no_begin, pending(), cmd, 3.0,
                                  stuck_after_s=0.5) is cmd  # fmt: skip
        await trio.sleep(2.0)  # the loop idles
        route["broker-a"] = NEW
        t0 = trio.current_time()
        with pytest.raises(MasterChanged), trio.fail_after(10):
            await watch.invoke(nowait_with(calls), no_begin, pending(), cmd, 3.0,
                               stuck_after_s=0.5)  # fmt: skip
        assert trio.current_time() - t0 <= 0.5 + POLL_S + 1e-9
        n.cancel_scope.cancel()


async def test_without_an_open_connection_the_request_takes_the_scoped_path(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No connection to write to at once: the request connects and is watched in
    `invoke_watched`'s pieces (a hung connect given up once the route moves)."""
    route = {"broker-a": NEW}
    connects: list[str] = []

    async def hung_connect(addr: str, _cmd: RemotingCommand) -> FakeCall:
        connects.append(addr)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with trio.open_nursery() as n:
        watch = RequestWatch(route.get, lambda _t: None, n.start_soon)
        with pytest.raises(MasterChanged), trio.fail_after(10):
            await watch.invoke(lambda _a, _c: None, hung_connect, pending(),
                               RemotingCommand(code=51), 3.0, stuck_after_s=0.5)  # fmt: skip
        assert connects == [OLD]
        n.cancel_scope.cancel()


async def never_invoked(_addr: str, _cmd: RemotingCommand, _timeout_s: float) -> RemotingCommand:
    raise AssertionError("a send over an open connection is written at once")


def writing_watch(master_of: Callable[[str], str | None], calls: list[FakeCall]) -> StuckSendWatch:
    """A producer's watch whose sends are written at once (an open connection each time)."""
    return StuckSendWatch(
        never_invoked, master_of, lambda _t: None, begin_nowait=nowait_with(calls)
    )


async def test_a_send_written_at_once_is_failed_once_the_route_moves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The producer's watch with ``begin_nowait`` (an open connection): the send is awaited
    with no scope and failed with MasterChanged within a poll of the route moving; released."""
    route = {"broker-a": OLD}
    calls: list[FakeCall] = []
    watch = writing_watch(route.get, calls)
    async with trio.open_nursery() as n:
        n.start_soon(watch.run)
        n.start_soon(master_moves, route, 1.0)
        t0 = trio.current_time()
        with pytest.raises(MasterChanged, match="re-sending"), trio.fail_after(10):
            await watch.invoke("T", "broker-a", OLD, RemotingCommand(code=10), 3.0)
        assert 1.0 <= trio.current_time() - t0 <= 1.0 + watch.poll_s + 1e-9
        assert watch.abandoned == 1 and calls[0].released
        n.cancel_scope.cancel()


async def test_a_send_written_at_once_times_out_within_a_poll_of_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[FakeCall] = []
    watch = writing_watch(lambda _b: OLD, calls)
    async with trio.open_nursery() as n:
        n.start_soon(watch.run)
        t0 = trio.current_time()
        with pytest.raises(RemotingTimeout, match=r"timed out after 3\.0s"), trio.fail_after(10):
            await watch.invoke("T", "broker-a", OLD, RemotingCommand(code=10), 3.0)
        assert 3.0 <= trio.current_time() - t0 <= 3.0 + watch.poll_s + 1e-9
        assert watch.abandoned == 0 and calls[0].released
        n.cancel_scope.cancel()


async def test_a_slow_answer_to_a_send_written_at_once_is_awaited(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[FakeCall] = []
    cmd = RemotingCommand(code=10)
    watch = writing_watch(lambda _b: OLD, calls)
    async with trio.open_nursery() as n:
        n.start_soon(watch.run)

        async def answer() -> None:
            await trio.sleep(2.0)
            calls[0].reply.set(cmd)

        n.start_soon(answer)
        assert await watch.invoke("T", "broker-a", OLD, cmd, 3.0) is cmd
        assert watch.abandoned == 0 and calls[0].released
        n.cancel_scope.cancel()
