"""Timer messages (arbitrary deliver time): the cascading wheel's arithmetic. Pure, no I/O.

Upstream keeps timer messages in ``rmq_sys_wheel_timer`` with a timer log and a wheel file of
its own; rocketrio keeps them in the same topic but lays them out as ConsumeQueues, so they
reuse the CommitLog, dispatch, recovery, replication and the schedule service's per-queue scan:

- Time is counted in ticks of `TIMER_RESOLUTION_MS` (100 ms). A deliver time is rounded *up*
  to a tick (a timer is never delivered before the time asked for; upstream rounds down to its
  timerPrecisionMs, 1 s by default, and so may deliver up to 1 s early).
- Level k (0 <= k < `TIMER_LEVELS`) has slots of ``TIMER_BASE ** k`` ticks: 100 ms, 1 s,
  10 s, ... 10^5 s. A message stored at time ``now`` for tick ``t`` waits at the highest level
  where ``t`` and ``now`` fall in different slots, in the queue of the slot distance ``d``,
  until the start of ``t``'s slot at that level. Then it is stored again (one "hop") and lands
  at a lower level; at level 0 the slot start is the deliver time itself.
- Within one queue (level k, distance d) the due times, ``(slot_k(now) + d) * size_k``, only
  grow with the store time, so a queue is due in its own order and the scan never has to look
  past its head. This is why the *store* picks the queue, from the store timestamp it stamps
  (message_store.py), not the sender.
- Queue 0 holds messages already due when stored (a hop that ran late).

A timer message is rewritten at most ``TIMER_LEVELS`` times (a 3-day delay: at most 7 hops;
typically one per non-zero decimal digit of the delay in ticks). Nothing is held in RAM per
pending message: the schedule service keeps one read position per queue.
"""

from __future__ import annotations

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_RESOLUTION_MS = 100
TIMER_BASE = 10
TIMER_LEVELS = 7
DUE_NOW_QUEUE = 0
# property: the deliver time, rounded up to a tick (upstream's PROPERTY_TIMER_OUT_MS)
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"

_PER_LEVEL = TIMER_BASE - 1  # slot distances 1..BASE-1 below the top level


def round_up_to_tick(deliver_ms: int) -> int:
    """The deliver time a timer message gets: the next tick boundary at or after it."""
    return -(-deliver_ms // TIMER_RESOLUTION_MS) * TIMER_RESOLUTION_MS


def queue_of(level: int, distance: int) -> int:
    """Queue id of (level, slot distance); the top level's distances are unbounded."""
    if level < 0 or level >= TIMER_LEVELS or distance < 1:
        raise ValueError(f"no timer queue for level {level}, distance {distance}")
    if level < TIMER_LEVELS - 1 and distance > _PER_LEVEL:
        raise ValueError(f"level {level} has distances 1..{_PER_LEVEL}, not {distance}")
    return 1 + level * _PER_LEVEL + distance - 1


def level_of(queue_id: int) -> tuple[int, int]:
    """(level, distance) of a queue id other than `DUE_NOW_QUEUE`."""
    if queue_id <= DUE_NOW_QUEUE:
        raise ValueError(f"timer queue {queue_id} has no level")
    i = queue_id - 1
    top = (TIMER_LEVELS - 1) * _PER_LEVEL
    if i < top:
        return i // _PER_LEVEL, i % _PER_LEVEL + 1
    return TIMER_LEVELS - 1, i - top + 1


def timer_queue_id(out_ms: int, now_ms: int) -> int:
    """The queue a timer message for ``out_ms`` (a tick boundary) waits in, stored at ``now_ms``."""
    t = out_ms // TIMER_RESOLUTION_MS
    n = now_ms // TIMER_RESOLUTION_MS
    if out_ms <= now_ms:
        return DUE_NOW_QUEUE
    for level in range(TIMER_LEVELS - 1, -1, -1):
        size = TIMER_BASE**level
        distance = t // size - n // size
        if distance > 0:
            return queue_of(level, distance)
    return DUE_NOW_QUEUE  # t == n and out_ms > now_ms cannot both hold for a tick boundary


def hop_due_ms(out_ms: int, queue_id: int) -> int:
    """When a message for ``out_ms`` waiting in ``queue_id`` is due (its ConsumeQueue tagsCode):
    the start of its deliver tick's slot at the queue's level."""
    if queue_id <= DUE_NOW_QUEUE:
        return out_ms
    level, _ = level_of(queue_id)
    size_ms = TIMER_BASE**level * TIMER_RESOLUTION_MS
    return out_ms // size_ms * size_ms


def max_queue_id(max_delay_ms: int) -> int:
    """The highest queue id a delay up to ``max_delay_ms`` can use (for sizing the topic)."""
    top_size = TIMER_BASE ** (TIMER_LEVELS - 1)
    ticks = -(-max_delay_ms // TIMER_RESOLUTION_MS)
    return queue_of(TIMER_LEVELS - 1, -(-ticks // top_size) + 1)
