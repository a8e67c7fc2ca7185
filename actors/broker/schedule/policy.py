"""Delay and timer decisions, pure: levels, where a delayed send is stored, what is due, what
a due message becomes. Time is passed in (wall-clock ms, the store's timestamps); no I/O.

Upstream's rules (ScheduleMessageService, HookUtils, SendMessageProcessor):

- ``messageDelayLevel`` lists the delay of each level, level 1 first; a DELAY=n>0 send is
  stored in SCHEDULE_TOPIC_XXXX queue n-1 (n clamped to the highest level) with REAL_TOPIC /
  REAL_QID; its ConsumeQueue tagsCode is store time + the level's delay (the store computes it).
- CONSUMER_SEND_MSG_BACK with delayLevel 0 uses level 3 + reconsumeTimes.
- A timer send (TIMER_DELAY_SEC, else TIMER_DELAY_MS, else TIMER_DELIVER_MS) further in the
  future than timerMaxDelaySec is refused; one already due is stored as a normal message.
- A due message goes back to REAL_TOPIC / REAL_QID with its properties, minus the ones that
  made it wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from rocketrio.protocol.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
)
from rocketrio.storage.store_dispatch import SCHEDULE_TOPIC
from rocketrio.storage.store_types import parse_delay_levels
from rocketrio.storage.timer_wheel import (
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    TIMER_TOPIC,
    round_up_to_tick,
)

SEND_BACK_FIRST_LEVEL = 3  # upstream: delayLevel 0 -> 3 + reconsumeTimes
# what a re-put removes: the properties that made the message wait
WAIT_PROPERTIES = (
    PROPERTY_REAL_TOPIC,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELIVER_MS,
)


def parse_message_delay_level(text: str) -> list[int]:
    """The delays (ms) of ``messageDelayLevel``, level 1 first; ValueError naming the key."""
    delays = parse_delay_levels(text)
    if not delays:
        raise ValueError("messageDelayLevel: no level given (e.g. '1s 5s 10s 30s 1m')")
    if any(d <= 0 for d in delays):
        raise ValueError(f"messageDelayLevel: every level must be > 0, got {text!r}")
    return delays


def schedule_queue(level: int, max_level: int) -> tuple[int, int]:
    """(level clamped to the highest, SCHEDULE_TOPIC_XXXX queue id) of a DELAY=level > 0."""
    clamped = min(level, max_level)
    return clamped, clamped - 1


def send_back_level(delay_level: int, reconsume_times: int) -> int:
    """The delay level of a consumer's send-back (0: the server decides, as upstream)."""
    return SEND_BACK_FIRST_LEVEL + reconsume_times if delay_level == 0 else delay_level


@attrs.frozen
class TimerIllegal:
    remark: str


def timer_deliver_ms(
    props: Mapping[str, str], now_ms: int, max_delay_ms: int
) -> int | TimerIllegal | None:
    """When a timer send is to be delivered (rounded up to the wheel's tick), None when it is
    not a timer message or already due, or why it is refused."""
    sec = props.get(PROPERTY_TIMER_DELAY_SEC)
    ms = props.get(PROPERTY_TIMER_DELAY_MS)
    at = props.get(PROPERTY_TIMER_DELIVER_MS)
    try:
        if sec is not None:
            deliver = now_ms + int(sec) * 1000
        elif ms is not None:
            deliver = now_ms + int(ms)
        elif at is not None:
            deliver = int(at)
        else:
            return None
    except ValueError:
        return TimerIllegal(
            "timer message illegal: TIMER_DELAY_SEC / TIMER_DELAY_MS / TIMER_DELIVER_MS must be "
            "an integer"
        )
    if deliver <= now_ms:
        return None
    if deliver - now_ms > max_delay_ms:
        return TimerIllegal(
            f"timer message illegal, the delay time should not be bigger than the max delay "
            f"{max_delay_ms}ms (timerMaxDelaySec)"
        )
    return round_up_to_tick(deliver)


def wait_target(
    props: Mapping[str, str],
    topic: str,
    queue_id: int,
    *,
    max_level: int,
    now_ms: int,
    timer_max_delay_ms: int,
) -> tuple[str, int, dict[str, str]] | None:
    """Where a message that must not be visible yet waits, outside the send path (a committed
    transactional message, as upstream's put hook delays it): (wait topic, queue, properties
    to add), or None to store it as it is. A timer that is illegal here is delivered at once:
    the send was accepted long ago and a commit cannot be refused for it."""
    real = {PROPERTY_REAL_TOPIC: topic, PROPERTY_REAL_QUEUE_ID: str(queue_id)}
    level = props.get(PROPERTY_DELAY_TIME_LEVEL, "")
    if level.isdigit() and int(level) > 0:
        return SCHEDULE_TOPIC, schedule_queue(int(level), max_level)[1], real
    deliver = timer_deliver_ms(props, now_ms, timer_max_delay_ms)
    if deliver is None or isinstance(deliver, TimerIllegal):
        return None
    return TIMER_TOPIC, 0, {PROPERTY_TIMER_OUT_MS: str(deliver), **real}


def due_prefix(dues_ms: Sequence[int], now_ms: int) -> tuple[int, int | None]:
    """How many entries at the head of a queue are due at ``now_ms``, and when the first one
    that is not falls due (None: every entry read is due). A queue is due in its own order
    (delay levels: constant delay; timer wheel: see timer_wheel.py), so the scan stops at the
    first entry not yet due."""
    for i, due in enumerate(dues_ms):
        if due > now_ms:
            return i, due
    return len(dues_ms), None


@attrs.frozen
class Deliver:
    """Re-put to the real topic and queue."""

    topic: str
    queue_id: int
    properties: dict[str, str]


@attrs.frozen
class Rehop:
    """A timer message whose hop is due but not its deliver time: store it in the wheel again
    (the store picks the lower level's queue)."""

    properties: dict[str, str]


Step = Deliver | Rehop


def real_target(props: Mapping[str, str]) -> Deliver:
    """What a due delay-level message becomes (properties without the waiting ones)."""
    topic = props.get(PROPERTY_REAL_TOPIC)
    qid = props.get(PROPERTY_REAL_QUEUE_ID, "0")
    if not topic:
        raise ValueError("a scheduled message without REAL_TOPIC")
    kept = {k: v for k, v in props.items() if k not in WAIT_PROPERTIES}
    return Deliver(topic, int(qid) if qid.isdigit() else 0, kept)


def timer_step(props: Mapping[str, str], out_ms: int, now_ms: int) -> Step:
    """A timer message's hop fell due at ``now_ms``: deliver it, or wait again in the wheel."""
    if out_ms <= now_ms:
        return real_target(props)
    return Rehop(dict(props))
