"""Long polling (upstream PullRequestHoldService): held pulls answered when messages arrive.

A pull that finds nothing and carries the SUSPEND flag is parked here, keyed by topic and
queue, with a deadline (suspendTimeoutMillis, or shortPollingTimeMills when long polling is
off). The store actor calls `notify_message_arriving` after every put with the queue's new max
offset; each held pull whose offset is below it is re-run at once (without suspending again).
One task sleeps until the earliest deadline and answers expired pulls with a last attempt,
so an idle queue costs nothing but a heap entry. The held pull's connection is never blocked:
the processor returned None and the answer goes out through ``ctx.respond`` later.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable

import attrs
import structlog
import trio

from rocketrio.actors.remoting import RequestContext
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import PullMessageRequestHeader
from rocketrio.protocol.remoting import RemotingCommand

log = structlog.get_logger("pull_hold")


@attrs.define(slots=True, eq=False)
class HeldPull:
    ctx: RequestContext
    header: PullMessageRequestHeader
    tag_codes: set[int] | None
    offset: int  # advanced past messages the filter rejected while held
    deadline: float
    done: bool = False


# execute(held, final) -> the response to send, or None to keep holding (only when not final)
Execute = Callable[[HeldPull, bool], RemotingCommand | None]


class PullRequestHoldService:
    def __init__(self, execute: Execute) -> None:
        self._execute = execute
        self._held: dict[tuple[str, int], list[HeldPull]] = {}
        self._heap: list[tuple[float, int, HeldPull]] = []
        self._seq = itertools.count()
        self._wakeup = trio.Event()
        self.count = 0

    def suspend(self, held: HeldPull) -> None:
        key = (held.header.topic, held.header.queueId)
        self._held.setdefault(key, []).append(held)
        heapq.heappush(self._heap, (held.deadline, next(self._seq), held))
        self.count += 1
        if self._heap[0][2] is held:
            self._wakeup.set()

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int) -> None:
        held_list = self._held.get((topic, queue_id))
        if not held_list:
            return
        keep: list[HeldPull] = []
        for held in held_list:
            if held.done:
                continue
            if held.offset >= max_offset or not self._answer(held, final=False):
                keep.append(held)
        if keep:
            self._held[(topic, queue_id)] = keep
        else:
            del self._held[(topic, queue_id)]

    def _answer(self, held: HeldPull, *, final: bool) -> bool:
        """Run the held pull; True when it was answered (and is done)."""
        if held.ctx.conn.closed:
            resp: RemotingCommand | None = None
        else:
            try:
                resp = self._execute(held, final)
            except Exception as e:
                log.error("held_pull_failed", topic=held.header.topic, exc_info=e)
                resp = held.ctx.cmd.make_response(
                    ResponseCode.SYSTEM_ERROR, f"pull failed: {type(e).__name__}: {e}"
                )
            if resp is None and not final:
                return False
        held.done = True
        self.count -= 1
        if resp is not None:
            held.ctx.respond(resp)
        return True

    def answer_all(self) -> None:
        """Shutdown: answer every held pull now (each gets its final attempt)."""
        for _, _, held in self._heap:
            if not held.done:
                self._answer(held, final=True)
        self._heap.clear()
        self._held.clear()

    def _expire(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, held = heapq.heappop(heap)
            if held.done:
                continue
            self._answer(held, final=True)
            key = (held.header.topic, held.header.queueId)
            rest = [h for h in self._held.get(key, ()) if not h.done]
            if rest:
                self._held[key] = rest
            else:
                self._held.pop(key, None)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            self._wakeup = trio.Event()
            deadline = self._heap[0][0] if self._heap else math.inf
            with trio.move_on_at(deadline):
                await self._wakeup.wait()
            self._expire(trio.current_time())
