"""The one long-polling loop (actors/broker/dispatch/long_poll.py) under the mock clock: a held
request is re-run when its key grows past its offset, kept while its re-run finds nothing,
answered once at its deadline with a final attempt, answered at once with that attempt when its
key is released, answered at once at shutdown, and a re-run
that raises is answered with the request's own failure; the held reply writes to its
connection (held_reply.py)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.dispatch.held_reply import HeldReply
from rocketrio.actors.broker.dispatch.long_poll import Held, LongPoll
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand


class Waiting:
    def __init__(self, owner: Hashable = "conn") -> None:
        self.owner = owner
        self.gone = False
        self.delivered: list[Any] = []

    def deliver(self, outcome: Any) -> None:
        self.delivered.append(outcome)


def held(
    reply: Waiting,
    keys: tuple[Hashable, ...],
    deadline: float,
    answers: list[Any],
    offset: int = -1,
) -> Held:
    """A held request whose re-runs answer ``answers`` in turn (None: keep holding)."""
    runs: list[bool] = []

    async def rerun(h: Held, final: bool) -> Any:
        runs.append(final)
        out = answers.pop(0) if answers else None
        return "final" if out is None and final else out

    h = Held(reply, runs, "T", keys, deadline, rerun, lambda e: f"failed: {e}", offset=offset)
    return h


async def test_rerun_only_when_the_key_grows_past_the_offset(
    mock_clock: trio.testing.MockClock,
) -> None:
    poll, reply = LongPoll(), Waiting()
    released: list[Held] = []
    poll.on_released = released.append
    h = held(reply, (("T", 0),), trio.current_time() + 30, [None, "found"], offset=5)
    async with trio.open_nursery() as n:
        n.start_soon(poll.run)
        poll.park(h)
        poll.notify(("T", 1), 100)  # another queue
        poll.notify(("T", 0), 5)  # not past the offset
        await trio.testing.wait_all_tasks_blocked()
        assert h.request == [] and poll.count == 1
        poll.notify(("T", 0), 6)
        await trio.testing.wait_all_tasks_blocked()
        assert h.request == [False] and reply.delivered == [] and poll.count == 1  # kept
        poll.notify(("T", 0), 7)
        await trio.testing.wait_all_tasks_blocked()
        assert reply.delivered == ["found"] and poll.count == 0 and released == [h]
        n.cancel_scope.cancel()


async def test_deadline_gives_one_final_attempt(mock_clock: trio.testing.MockClock) -> None:
    poll, reply = LongPoll(), Waiting()
    h = held(reply, ("T",), trio.current_time() + 15, [])
    async with trio.open_nursery() as n:
        n.start_soon(poll.run)
        poll.park(h)
        await trio.sleep(14.9)
        assert reply.delivered == []
        await trio.sleep(0.2)
        assert reply.delivered == ["final"] and h.request == [True] and h.done
        n.cancel_scope.cancel()


async def test_release_answers_a_keys_held_requests_now(
    mock_clock: trio.testing.MockClock,
) -> None:
    poll = LongPoll()
    moved, other, both = Waiting(), Waiting(), Waiting()
    deadline = trio.current_time() + 15
    h_moved = held(moved, (("T", 0),), deadline, [])
    h_other = held(other, (("T", 1),), deadline, [])
    h_both = held(both, (("T", 1), ("T", 0)), deadline, [])
    async with trio.open_nursery() as n:
        n.start_soon(poll.run)
        for h in (h_moved, h_other, h_both):
            poll.park(h)
        poll.release([("T", 0), ("T", 9)])  # a key nothing is held on is ignored
        await trio.testing.wait_all_tasks_blocked()
        # the last attempt, at once: final=True, its outcome answered
        assert h_moved.request == [True] and moved.delivered == ["final"]
        assert h_both.request == [True] and both.delivered == ["final"]
        assert h_other.request == [] and other.delivered == [] and poll.count == 1
        poll.notify(("T", 0), 100)  # nothing left held there
        await trio.testing.wait_all_tasks_blocked()
        assert h_moved.request == [True] and h_both.request == [True]
        await trio.sleep(16)  # the others wait for their deadline
        assert other.delivered == ["final"] and poll.count == 0
        n.cancel_scope.cancel()


async def test_any_arrival_wakes_a_request_without_offset(
    mock_clock: trio.testing.MockClock,
) -> None:
    poll, reply = LongPoll(), Waiting()
    h = held(reply, ("T", "%RETRY%g_T"), trio.current_time() + 30, ["popped"])
    async with trio.open_nursery() as n:
        n.start_soon(poll.run)
        poll.park(h)
        poll.notify("%RETRY%g_T", -1)
        await trio.testing.wait_all_tasks_blocked()
        assert reply.delivered == ["popped"] and poll.count == 0
        n.cancel_scope.cancel()


async def test_shutdown_answers_everything_and_a_failure_is_answered(
    mock_clock: trio.testing.MockClock,
) -> None:
    poll = LongPoll()
    ok, gone, broken = Waiting(), Waiting(), Waiting()
    gone.gone = True

    async def boom(h: Held, final: bool) -> Any:
        raise RuntimeError("disk")

    bad = Held(broken, None, "T", ("T",), trio.current_time() + 30, boom, lambda e: f"x {e}")
    poll.park(held(ok, ("T",), trio.current_time() + 30, []))
    poll.park(held(gone, ("T",), trio.current_time() + 30, []))
    poll.park(bad)
    poll.stop_holding()
    assert not poll.holding
    await poll.answer_all()
    assert ok.delivered == ["final"] and gone.delivered == [] and broken.delivered == ["x disk"]
    assert poll.count == 0


class _Conn:
    """Just enough of a Connection for a response: closed, send_nowait, no latency metric."""

    rpc_latency = None

    def __init__(self) -> None:
        self.closed = False
        self.sent: list[RemotingCommand] = []

    def send_nowait(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)


async def test_held_reply_encodes_with_its_packages_encoder() -> None:
    conn = _Conn()
    cmd = RemotingCommand(RequestCode.PULL_MESSAGE, opaque=9)
    ctx = RequestContext(conn, cmd)  # type: ignore[arg-type]
    reply: HeldReply[str] = HeldReply(
        ctx, lambda c, outcome: c.make_response(ResponseCode.SUCCESS, outcome)
    )
    assert reply.owner is conn and not reply.gone
    reply.deliver("found 3")
    assert [(r.code, r.remark, r.opaque) for r in conn.sent] == [
        (ResponseCode.SUCCESS, "found 3", 9)
    ]
    conn.closed = True
    assert reply.gone
