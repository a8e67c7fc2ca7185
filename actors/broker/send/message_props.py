"""A sent message's properties, as the send path reads and extends them without decoding all of
them (the encoded ``k\x01v\x02`` string), and where a delay-level or timer send waits
(schedule/policy.py decides the level and the time; this places the message).
"""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.schedule.policy import TimerIllegal, schedule_queue, timer_deliver_ms
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
)
from rocketrio.storage.message_store import SCHEDULE_TOPIC
from rocketrio.storage.timer_wheel import (
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    TIMER_TOPIC,
)

TIMER_KEYS = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)


def prop_value(props: str, key: str) -> str | None:
    """One property of an encoded ``k\\x01v\\x02`` string without decoding all of it."""
    tag = key + "\x01"
    if props.startswith(tag):
        start = len(tag)
    else:
        i = props.find("\x02" + tag)
        if i < 0:
            return None
        start = i + 1 + len(tag)
    end = props.find("\x02", start)
    return props[start:] if end < 0 else props[start:end]


def append_props(props: str, extra: str) -> str:
    if props and not props.endswith("\x02"):
        props += "\x02"
    return props + extra


def stamp_props(props: str, cluster_pair: str, new_uniq_key: Callable[[], str]) -> tuple[str, str]:
    """A single send's properties as stored, and its UNIQ_KEY: the client's (`prop_value`), or
    ``new_uniq_key()`` appended when it gave none (or an empty one), then ``cluster_pair``
    (`append_props` twice in one call: the send's hot path)."""
    tag = "UNIQ_KEY\x01"
    if props.startswith(tag):
        start = 9
    else:
        i = props.find("\x02UNIQ_KEY\x01")
        start = -1 if i < 0 else i + 10
    uniq = ""
    if start >= 0:
        end = props.find("\x02", start)
        uniq = props[start:] if end < 0 else props[start:end]
    if props and not props.endswith("\x02"):
        props += "\x02"
    if uniq:
        return props + cluster_pair, uniq
    uniq = new_uniq_key()
    return f"{props}{tag}{uniq}\x02{cluster_pair}", uniq


def delay_route(
    props: str,
    topic: str,
    queue_id: int,
    delay_levels: int,
    now_ms: Callable[[], int],
    timer_max_delay_ms: int,
) -> tuple[str, int, str] | Refusal | None:
    """A delay-level or timer send: (wait topic, queue, properties with the real topic and
    queue); None for a message to store as it is."""
    level = prop_value(props, PROPERTY_DELAY_TIME_LEVEL)
    if level and level.isdigit() and int(level) > 0:
        _, wait_queue = schedule_queue(int(level), delay_levels)
        real = f"{PROPERTY_REAL_TOPIC}\x01{topic}\x02{PROPERTY_REAL_QUEUE_ID}\x01{queue_id}\x02"
        return SCHEDULE_TOPIC, wait_queue, append_props(props, real)
    if "TIMER_" not in props:
        return None
    timer_props = {k: v for k in TIMER_KEYS if (v := prop_value(props, k)) is not None}
    deliver = timer_deliver_ms(timer_props, now_ms(), timer_max_delay_ms)
    if deliver is None:
        return None
    if isinstance(deliver, TimerIllegal):
        return Refusal(ResponseCode.MESSAGE_ILLEGAL, deliver.remark)
    extra = (
        f"{PROPERTY_TIMER_OUT_MS}\x01{deliver}\x02{PROPERTY_REAL_TOPIC}\x01{topic}\x02"
        f"{PROPERTY_REAL_QUEUE_ID}\x01{queue_id}\x02"
    )
    return TIMER_TOPIC, 0, append_props(props, extra)
