"""Delay and timer message benchmark against real NameServer + Broker processes on loopback.

Prints ONE JSON line with:
- plain_send_msgs_per_s      single sends (send_async, 256 in flight) to a normal topic
- delay_send_msgs_per_s      the same with DELAY=1 (stored in SCHEDULE_TOPIC_XXXX), and
  delay_vs_plain_send_ratio  delay / plain
- timer_send_msgs_per_s      the same with TIMER_DELIVER_MS (stored in rmq_sys_wheel_timer)
- timer_in_flight            timer messages waiting at once (all due at the same instant)
- timer_delivered_msgs_per_s how fast the broker re-puts them once due and a push consumer
                             receives them (first due -> last received)
- delay_late_p50_ms / p99_ms / max_ms  how late DELAY=1 messages sent at a steady rate reach
                             the consumer after their due time (born + level delay), re-put
                             and consumer pull included
- delay_reput_late_p50_ms / p99_ms  the broker's part of it: the re-put's store time after
                             born + level delay (the send's own latency included)
- delay_rate_msgs_per_s      that steady send rate

    .venv/bin/python bench/delay.py [--count N] [--rate R]

Default run: about 40 s. The broker uses messageDelayLevel "2s 5s" (short levels keep the
run short; the service's cost does not depend on the level's length).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

import trio
from benchlib import BODY, Proc, create_topics, one_broker, pct, single_sends, stop_all

from rocketrio.actors.client.config import ProducerConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.observe.logs import configure_logging

LEVEL1_MS = 2000


async def timed_sends(ns: str, topic: str, msgs: list[Message], inflight: int = 256) -> float:
    cfg = ProducerConfig(producerGroup=f"d_{topic}", maxInFlight=inflight)
    async with Producer(f"d_{topic}", ns, config=cfg) as p:
        t0 = time.perf_counter()
        futs = [await p.send_async(m) for m in msgs]
        for f in futs:
            await f.wait()
        return len(msgs) / (time.perf_counter() - t0)


async def consume(
    ns: str, topic: str, group: str, expected: int, arrivals: list[tuple[float, Any]]
) -> None:
    """Receive ``expected`` messages; (wall-clock ms, message) of each into ``arrivals``."""
    done = trio.Event()

    def listener(msgs: list[Any]) -> ConsumeStatus:
        now = time.time() * 1000
        arrivals.extend((now, m) for m in msgs if m.body == BODY)  # not wait_writable's probe
        if len(arrivals) >= expected:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(group, ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                     pull_batch_size=256, consume_batch_size=256)  # fmt: skip
    c.subscribe(topic, "*")
    c.register_listener(listener)
    async with c:
        with trio.move_on_after(120):
            await done.wait()


async def timer_burst(ns: str, count: int, send_rate: float, result: dict[str, Any]) -> None:
    """``count`` timers all due at one instant (after they were all sent, at ``send_rate``):
    in flight at once, then delivered."""
    arrivals: list[tuple[float, Any]] = []
    async with trio.open_nursery() as n:
        n.start_soon(consume, ns, "BenchTimer", "bench_timer", count, arrivals)
        due_ms = int(time.time() * 1000 + count / send_rate * 3000) + 3000
        msgs = [
            Message("BenchTimer", BODY, properties={"TIMER_DELIVER_MS": str(due_ms)})
            for _ in range(count)
        ]
        result["timer_send_msgs_per_s"] = round(await timed_sends(ns, "BenchTimer", msgs))
        result["timer_in_flight"] = count
    if len(arrivals) < count:
        raise RuntimeError(f"only {len(arrivals)} of {count} timer messages arrived")
    if any("TIMER_OUT_MS" not in m.properties for _, m in arrivals):
        bad = next(m for _, m in arrivals if "TIMER_OUT_MS" not in m.properties)
        raise RuntimeError(f"a timer message stored after its deliver time: {bad.properties}")
    first_due = min(int(m.properties["TIMER_OUT_MS"]) for _, m in arrivals)
    last = max(t for t, _ in arrivals)
    early = sum(1 for t, m in arrivals if t < int(m.properties["TIMER_OUT_MS"]))
    result["timer_delivered_msgs_per_s"] = round(count / max(0.001, (last - first_due) / 1000))
    result["timer_received_early"] = early


async def delay_at_rate(ns: str, rate: int, seconds: float, result: dict[str, Any]) -> None:
    """DELAY=1 sends at a steady rate; how late each reaches the consumer after its due."""
    total = int(rate * seconds)
    arrivals: list[tuple[float, Any]] = []
    async with trio.open_nursery() as n:
        n.start_soon(consume, ns, "BenchDelayRate", "bench_delay_rate", total, arrivals)
        async with Producer("delay_rate", ns) as p:
            start = trio.current_time()
            async with trio.open_nursery() as senders:
                for i in range(total):
                    await trio.sleep_until(start + i / rate)
                    senders.start_soon(p.send, Message("BenchDelayRate", BODY, delay_time_level=1))
    late = [t - (m.born_timestamp + LEVEL1_MS) for t, m in arrivals]
    # the broker's own part: its re-put's store time after the due time (born time stands in
    # for the first store time, so the send's latency counts against the broker)
    reput = [m.store_timestamp - (m.born_timestamp + LEVEL1_MS) for _, m in arrivals]
    result.update(
        delay_rate_msgs_per_s=rate,
        delay_received=len(arrivals),
        delay_reput_late_p50_ms=round(pct(reput, 0.5), 1),
        delay_reput_late_p99_ms=round(pct(reput, 0.99), 1),
        delay_reput_early=sum(1 for x in reput if x < 0),
        delay_late_p50_ms=round(pct(late, 0.5), 1),
        delay_late_p99_ms=round(pct(late, 0.99), 1),
        delay_late_max_ms=round(max(late), 1),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=20_000, help="messages per send phase")
    ap.add_argument("--rate", type=int, default=1000, help="DELAY=1 sends/s, 5 s long")
    args = ap.parse_args()
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-delay-")
    procs: list[Proc] = []
    result: dict[str, Any] = {"bench": "delay", "body_bytes": len(BODY), "count": args.count}
    try:
        ns, broker = one_broker(procs, work, "bench-delay", messageDelayLevel="2s 5s")
        trio.run(
            create_topics, ns, broker, ["BenchPlain", "BenchDelay", "BenchTimer", "BenchDelayRate"]
        )
        plain = trio.run(single_sends, ns, "BenchPlain", args.count)
        delayed = [Message("BenchDelay", BODY, delay_time_level=2) for _ in range(args.count)]
        delay = trio.run(timed_sends, ns, "BenchDelay", delayed)
        result["plain_send_msgs_per_s"] = round(plain)
        result["delay_send_msgs_per_s"] = round(delay)
        result["delay_vs_plain_send_ratio"] = round(delay / plain, 2)
        trio.run(timer_burst, ns, args.count, delay, result)
        trio.run(delay_at_rate, ns, args.rate, 5.0, result)
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
