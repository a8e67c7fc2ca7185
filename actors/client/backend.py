"""The client's one door to an event loop: every concurrency primitive the client uses, on anyio.

The client runs natively on asyncio and on Trio (anyio picks the running loop), so its modules
import their primitives from here and never from ``trio`` or ``asyncio`` directly (the import
rule in tests/unit/test_import_rules.py holds them to it). Under Trio, anyio's clock is Trio's, so
a test's ``MockClock`` drives the client as before.

Two things need the loop's own API and live here only:

- `adapt_stream` turns a kernel `Transport`'s Trio stream (the tests' ``SimNetwork``, the servers'
  ``TcpTransport``) into the anyio byte-stream interface the client's connections speak;
- `task_stacks` lists the running Trio tasks' await stacks for GET_CONSUMER_RUNNING_INFO's jstack.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread
import sniffio
import trio
from anyio import (
    BrokenResourceError,
    CancelScope,
    CapacityLimiter,
    ClosedResourceError,
    EndOfStream,
    Lock,
    Semaphore,
    WouldBlock,
    create_memory_object_stream,
    create_task_group,
    fail_after,
    sleep,
    sleep_until,
)
from anyio.abc import ByteStream, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from rocketrio.actors.kernel import runtime

__all__ = [
    "BrokenResourceError",
    "ByteStream",
    "CancelScope",
    "CapacityLimiter",
    "ClosedResourceError",
    "EndOfStream",
    "Event",
    "Lock",
    "MemoryObjectReceiveStream",
    "MemoryObjectSendStream",
    "Reply",
    "Scope",
    "Semaphore",
    "TaskGroup",
    "WaitTimeout",
    "WouldBlock",
    "adapt_stream",
    "checkpoint",
    "create_memory_object_stream",
    "create_task_group",
    "current_time",
    "every",
    "fail_after",
    "move_on_after",
    "move_on_at",
    "new_event",
    "run_sync_in_thread",
    "sleep",
    "sleep_until",
    "task_stacks",
]

T = TypeVar("T")
R = TypeVar("R")

# -- the hot path: called per message, so they skip anyio's per-call backend lookup (about
# 1-2 us each; docs/benchmarks.md) and use the loop's own call, the one anyio would make. Trio
# names its runs in sniffio's thread local, so one attribute read tells Trio from asyncio (the
# only other loop anyio runs the client on).
_sniffio_local = sniffio.thread_local


class Event(Protocol):
    """What the client uses of an event (anyio's and Trio's both fit)."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> None: ...


class Scope(Protocol):
    """What the client uses of a timeout scope (anyio's and Trio's both fit)."""

    cancelled_caught: bool

    def cancel(self) -> None: ...

    def __enter__(self) -> Scope: ...

    def __exit__(self, *exc: object) -> bool | None: ...


def new_event() -> Event:
    """An event on the running loop."""
    if _sniffio_local.name == "trio":
        return trio.Event()
    return asyncio.Event()  # (what anyio's asyncio Event wraps)


def current_time() -> float:
    """The running loop's clock (under Trio, Trio's: a test's MockClock drives it)."""
    if _sniffio_local.name == "trio":
        return trio.current_time()
    return asyncio.get_running_loop().time()  # (what anyio.current_time returns there)


def move_on_after(seconds: float) -> Scope:
    """A scope that stops its body after ``seconds`` (``cancelled_caught`` tells)."""
    if _sniffio_local.name == "trio":
        return trio.move_on_after(seconds)
    return anyio.move_on_after(seconds)


def move_on_at(deadline: float) -> Scope:
    """A scope that stops its body at ``deadline`` (the loop's clock)."""
    if _sniffio_local.name == "trio":
        return trio.move_on_at(deadline)
    return CancelScope(deadline=deadline)


def checkpoint() -> Awaitable[None]:
    """``await aio.checkpoint()``: let other tasks run (and see a cancellation). Returns the
    loop's own awaitable, so the hot path has no coroutine frame of ours in between."""
    if _sniffio_local.name == "trio":
        return trio.lowlevel.checkpoint()
    return asyncio.sleep(0)  # (anyio's asyncio checkpoint)


async def run_sync_in_thread(fn: Callable[..., R], *args: Any) -> R:
    """Run a blocking function in a worker thread (anyio's default limiter)."""
    return await anyio.to_thread.run_sync(fn, *args)


async def every(
    period_s: float,
    fn: Callable[[], Awaitable[None]],
    *,
    initial_delay_s: float | None = None,
) -> None:
    """Run ``fn`` every ``period_s`` (fixed rate, no drift, no overlap); errors propagate."""
    next_at = current_time() + (period_s if initial_delay_s is None else initial_delay_s)
    while True:
        await sleep_until(next_at)
        await fn()
        next_at = max(next_at + period_s, current_time())


class WaitTimeout(Exception):
    """`Reply.wait` saw no answer in time."""


class Reply(runtime.Reply[T]):
    """A one-shot answer slot on the running loop (asyncio or Trio): the kernel's `Reply`
    with this module's event and timeout scope; a missed deadline raises `WaitTimeout`."""

    __slots__ = ()
    _new_event = staticmethod(new_event)
    _move_on_after = staticmethod(move_on_after)
    _timeout = WaitTimeout


class _TrioStreamAdapter(ByteStream):
    """A Trio ``Stream`` (send_all / receive_some) seen as an anyio `ByteStream`; only used
    while running on Trio (a kernel `Transport` is Trio-only)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._errors = (trio.BrokenResourceError, trio.ClosedResourceError)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            data = await self._stream.receive_some(max_bytes)
        except self._errors as e:
            raise BrokenResourceError(str(e)) from e
        if not data:
            raise EndOfStream
        return bytes(data)

    async def send(self, item: bytes) -> None:
        try:
            await self._stream.send_all(item)
        except self._errors as e:
            raise BrokenResourceError(str(e)) from e

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()

    @property
    def extra_attributes(self) -> dict[Any, Callable[[], Any]]:
        return {}


def adapt_stream(stream: Any) -> ByteStream:
    """An anyio byte stream as is; a Trio stream (from a kernel `Transport`) wrapped."""
    if isinstance(stream, ByteStream):
        return stream
    return _TrioStreamAdapter(stream)


def current_backend() -> str:
    """The loop this task runs on: "asyncio" or "trio"."""
    return sniffio.current_async_library()


def task_stacks() -> list[str]:
    """The await stacks of the running loop's tasks (Trio: the whole task tree; asyncio: every
    task of the loop), one text block per task."""
    try:
        backend = current_backend()
    except sniffio.AsyncLibraryNotFoundError:
        return []
    if backend == "trio":
        return _trio_stacks()
    return _asyncio_stacks()


def _trio_stacks() -> list[str]:
    out: list[str] = []
    todo = [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        if task is None:
            continue
        lines = [f"{task.name:<40}(trio task)\n"]
        for frame, lineno in task.iter_await_frames():
            code = frame.f_code
            lines.append(f'  File "{code.co_filename}", line {lineno}, in {code.co_name}\n')
        out.append("".join(lines))
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return out


def _asyncio_stacks() -> list[str]:
    import io

    out: list[str] = []
    for task in asyncio.all_tasks():
        buf = io.StringIO()
        buf.write(f"{task.get_name():<40}(asyncio task)\n")
        task.print_stack(file=buf)
        out.append(buf.getvalue())
    return out


def running_in_trio() -> bool:
    """True when the current task runs on Trio (used to pick a default transport)."""
    try:
        return current_backend() == "trio"
    except sniffio.AsyncLibraryNotFoundError:
        return False


def monotonic_ms() -> int:
    """The loop's clock in whole milliseconds, rounded (as kernel/clock.py explains)."""
    return round(current_time() * 1000)
