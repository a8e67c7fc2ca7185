"""The actor runtime: typed inboxes, ask/reply with timeouts, supervision, periodic tasks.

An actor owns its state and is reached only through its inbox, a bounded Trio memory channel of
frozen attrs messages. A request that wants an answer carries a `Reply` slot: the caller awaits
it with a timeout (`ask`), the actor fills it exactly once (`Reply.set` / `Reply.fail`). Replies
can also be delivered by a callback (`Reply(on_done=...)`), which is how a connection gets its
response written without a task per request.

Supervision is structured: `supervise()` runs a child inside the caller's nursery and, on a
crash, logs it with the traceback and either restarts it with exponential backoff (services that
may fail, e.g. a connection to a peer) or re-raises so the process fails loudly. Nothing is
swallowed. All time comes from Trio's clock, so `MockClock` drives whole failovers in tests.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, assert_never

import structlog
import trio

from rocketrio.actors.kernel.restart_policy import GiveUp, Restart, RestartPolicy, RestartTracker
from rocketrio.actors.observe import events

M = TypeVar("M")
T = TypeVar("T")

log = structlog.get_logger("runtime")


# Runs blocking storage work; a worker thread in production (`trio.to_thread.run_sync`). Tests
# on MockClock pass an inline runner: the autojump clock would otherwise fly forward while a
# thread fsyncs, past the timeouts of the requests waiting for it.
IoRunner = Callable[..., Awaitable[Any]]


class AskTimeout(Exception):
    """An ask was not answered within its timeout."""


class ActorStopped(Exception):
    """The actor's inbox is closed: it stopped or crashed."""


class Reply(Generic[T]):
    """A one-shot answer slot. Set once; later sets are ignored (first answer wins). Awaited
    (`wait`) or handed to a callback (``on_done``). The loop primitives are class attributes,
    so the client's backend-neutral slot (`client.backend.Reply`) is this class on anyio's."""

    __slots__ = ("_event", "_exc", "_on_done", "_value", "done")
    _new_event: Callable[[], Any] = staticmethod(trio.Event)
    _move_on_after: Callable[[float], Any] = staticmethod(trio.move_on_after)
    _timeout: type[Exception] = AskTimeout

    def __init__(self, on_done: Callable[[Reply[T]], None] | None = None) -> None:
        self._event: Any = None if on_done else self._new_event()
        self._on_done = on_done
        self._value: T | None = None
        self._exc: BaseException | None = None
        self.done = False

    def set(self, value: T) -> None:
        if self.done:
            return
        self._value = value
        self._finish()

    def fail(self, exc: BaseException) -> None:
        if self.done:
            return
        self._exc = exc
        self._finish()

    def _finish(self) -> None:
        self.done = True
        if self._on_done is not None:
            self._on_done(self)
        elif self._event is not None:
            self._event.set()

    def result(self) -> T:
        if self._exc is not None:
            raise self._exc
        return self._value  # type: ignore[return-value]

    async def wait(self, timeout: float = math.inf) -> T:
        if self._event is None:
            raise RuntimeError("a callback Reply cannot be awaited")
        if timeout == math.inf:  # no scope to make (the caller's own scopes bound the wait)
            await self._event.wait()
            return self.result()
        with self._move_on_after(timeout):
            await self._event.wait()
            return self.result()
        raise self._timeout(f"no reply within {timeout}s")


class Actor(abc.ABC, Generic[M]):
    """Base class: one inbox, one `run()` that lives in a nursery, `handle()` per message.

    Subclasses implement `handle(msg)`; they may override `run()` to add periodic tasks (call
    `self.serve_inbox()` in the nursery). `tell` / `ask` are the only ways in.
    """

    inbox_capacity: int = 1024

    def __init__(self, name: str) -> None:
        self.name = name
        self._send: trio.MemorySendChannel[M]
        self._recv: trio.MemoryReceiveChannel[M]
        self._send, self._recv = trio.open_memory_channel(self.inbox_capacity)
        self.log = structlog.get_logger(name).bind(actor=name)

    async def tell(self, msg: M) -> None:
        try:
            await self._send.send(msg)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise ActorStopped(self.name) from None

    def tell_nowait(self, msg: M) -> None:
        """Enqueue without waiting; raises trio.WouldBlock when the inbox is full (backpressure)."""
        try:
            self._send.send_nowait(msg)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise ActorStopped(self.name) from None

    async def ask(self, make: Callable[[Reply[T]], M], timeout: float) -> T:
        """Send ``make(reply)`` and wait for the answer, at most ``timeout`` seconds."""
        reply: Reply[T] = Reply()
        with trio.move_on_after(timeout) as scope:
            await self.tell(make(reply))
            await reply._event.wait()  # type: ignore[union-attr]
        if scope.cancelled_caught:
            raise AskTimeout(f"{self.name} did not answer within {timeout}s")
        return reply.result()

    @abc.abstractmethod
    async def handle(self, msg: M) -> None:
        """Process one inbox message; an exception here crashes the actor (supervised)."""

    async def serve_inbox(self) -> None:
        async with self._recv:
            async for msg in self._recv:
                await self.handle(msg)

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started(self)
        await self.serve_inbox()


async def every(
    period_s: float,
    fn: Callable[[], Awaitable[None]],
    *,
    initial_delay_s: float | None = None,
) -> None:
    """Run ``fn`` every ``period_s`` on Trio's clock (fixed rate, no drift, no overlap).

    An exception from ``fn`` propagates: the owning actor is supervised, not this loop.
    """
    next_at = trio.current_time() + (period_s if initial_delay_s is None else initial_delay_s)
    while True:
        await trio.sleep_until(next_at)
        await fn()
        next_at = max(next_at + period_s, trio.current_time())


async def every_sync(period_s: float, fn: Callable[[], object]) -> None:
    """Call a plain function ``period_s`` after each call (fixed delay): for quick in-loop work
    (sampling, scans) that needs no await."""
    while True:
        await trio.sleep(period_s)
        fn()


async def supervise(
    name: str,
    child: Callable[[], Awaitable[None]],
    *,
    restart: bool,
    backoff_min_s: float = 0.1,
    backoff_max_s: float = 5.0,
    max_restarts: int | None = None,
    on_crash: Callable[[BaseException, int], None] | None = None,
) -> None:
    """Run ``child()``; on a crash log it and restart with backoff, or fail loudly.

    With ``restart=False`` the exception propagates (the parent nursery and so the process come
    down). With ``restart=True`` the child is restarted after 0.1 s, 0.2 s, ... up to
    ``backoff_max_s`` (the `RestartPolicy` of `restart_policy`, shared with `rocketrio up`); a run
    longer than ``backoff_max_s`` resets the backoff and the count. ``max_restarts`` bounds the
    restarts in a row, after which the last exception propagates. Cancellation is never treated as
    a crash.
    """
    tracker = RestartTracker(RestartPolicy(backoff_min_s, backoff_max_s, max_restarts))
    while True:
        started = trio.current_time()
        try:
            await child()
            return
        except Exception as exc:
            ran = trio.current_time() - started
            if on_crash is not None:
                on_crash(exc, tracker.restarts)
            decision = tracker.on_exit(ran) if restart else GiveUp(tracker.restarts)
            match decision:
                case GiveUp():
                    events.emit(
                        log, events.ActorCrashed(restarting=False), actor=name, exc_info=exc
                    )
                    raise
                case Restart(delay_s=delay_s):
                    events.emit(
                        log,
                        events.ActorCrashed(
                            restarting=True,
                            backoff_s=delay_s,
                            restart=decision.restart,
                            error=f"{type(exc).__name__}: {exc}",
                        ),
                        actor=name,
                        level="warning",
                    )
                    await trio.sleep(delay_s)
                case _:
                    assert_never(decision)
