"""The project's PushConsumer in the whole-cluster simulation (issue 26 item 2, SPEC F1).

`PushDriver` runs a real `PushConsumer` (actors/client/push_consumer.py: route polling,
rebalance, long-polling pulls, offset commits, send-back through the retry topic) of the group
`PUSH_GROUP` on the simulation's network and MockClock, from the moment the producers start
until after the final checks; it lives through every fault of the run. Its listener records
every body it consumes; a seed's `push_fail_share` of first deliveries is answered
RECONSUME_LATER, so those messages go back through %RETRY%<group> and the schedule topic while
brokers fail.

Checks:

- **Every acknowledged message is consumed at least once by the group** (`drain`): after the
  final checks, within `DRAIN_BOUND_S`, the group has consumed every body still acknowledged
  (the checker's `acked`; a message lost under a weak ack mode's rule is no longer expected,
  and neither is one whose send-back went to a weak set that failed over afterwards: the retry
  copy was acknowledged under the same rule). Duplicates are counted (`push_duplicates`), not
  failures: at-least-once.
- **Committed offsets never move backwards by more than the documented bound**
  (offset_watch.py, docs/metadata-failover.md).
- **Per-queue order** (`OrderlyDriver`, in the seeds that draw it): a second group,
  `ORDERLY_GROUP`, runs the project's `OrderlyPushConsumer` (queue locks, one batch at a time);
  the simulation's sends are not keyed, so the order it can check is each queue's: the group
  never consumes a queue offset before every lower offset of that queue (from 0: it starts at
  the first offset). Queue offsets a consumer can see are dense and never change (only
  confirmed entries are dispatched), so this is exactly "in order, no gaps"; re-consuming from
  an earlier offset after a failover or a lost lock is allowed (at-least-once). It drains like
  the push group.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import trio

from rocketrio.actors.client.config import ClientConfig, ConsumeFromWhere, PushConsumerConfig
from rocketrio.actors.client.message import ConsumeStatus
from rocketrio.actors.client.orderly import ConsumeOrderlyStatus
from rocketrio.actors.client.orderly_consumer import OrderlyPushConsumer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.protocol.message_format import MessageExt
from tests.harness.blocking import inline_blocking
from tests.sim.cluster_checks import ClusterChecker
from tests.sim.cluster_clients import TOPIC
from tests.sim.replication_draw import SETS

PUSH_GROUP = "SimPush"
PUSH_HOST = "10.0.9.70"
PUSH_SALT = 0x9054  # the listener's RNG: seed ^ PUSH_SALT
ORDERLY_GROUP = "SimOrderly"
ORDERLY_HOST = "10.0.9.71"
# after the final checks: a pull held by a broker that died without closing the connection
# waits out the client's consumerTimeoutMillisWhenSuspend (30 s), then the route and the
# rebalance (both polled every CLIENT_PERIOD_MS), a retry's delay (1-3 s with the simulation's
# messageDelayLevel) and a failed send-back consumed again locally (5 s); each run records its
# drain time (drain_s_max_<group>): at most 28 s over seeds 408-999
DRAIN_BOUND_S = 45.0
CLIENT_PERIOD_MS = 3000


def set_of(msg: MessageExt) -> str:
    """The broker set that stored the message (its store host is 10.0.<set + 2>.x)."""
    return SETS[int(msg.store_host.split(".")[2]) - 2]


def missing_bodies(
    checker: ClusterChecker, consumed: dict[bytes, int], sent_back: dict[bytes, tuple[str, int]]
) -> list[bytes]:
    """Acknowledged bodies a group has not consumed and is still expected to."""
    out = []
    for body in checker.acked.values():
        if body in consumed:
            continue
        back = sent_back.get(body)
        if (
            back is not None
            and back[0] in checker.weak_sets
            and checker.set_epoch(back[0]) > back[1]
        ):
            continue  # its retry copy was acknowledged under the weak rule, then a failover
        out.append(body)
    return out


async def drain_group(
    checker: ClusterChecker,
    group: str,
    missing: Callable[[], list[bytes]],
    step: Callable[[], None],
) -> None:
    """Bounded wait until ``group`` consumed every acknowledged message (at least once)."""
    deadline = trio.current_time() + DRAIN_BOUND_S
    checker.note(f"draining the consumer group {group}")
    while lost := missing():
        if trio.current_time() > deadline:
            where = [p for p, b in checker.acked.items() if b == lost[0]]
            checker.fail(
                f"acknowledged but never consumed by the consumer group {group}: "
                f"{len(lost)} message(s), e.g. {lost[0][:12]!r} at {where} "
                f"({', '.join(checker.acked_by[p] for p in where)}); "
                f"{DRAIN_BOUND_S}s after the final checks"
            )
        step()
        await trio.sleep(0.5)
    took = int(trio.current_time() - deadline + DRAIN_BOUND_S)
    key = f"drain_s_max_{group}"
    checker.stats[key] = max(checker.stats.get(key, 0), took)


def consumer_kwargs(group: str, host: str, instance: str, transport: object) -> dict[str, Any]:
    """A sim consumer group's settings: from the first offset, the sim's short client periods,
    the sim network, file calls inline."""
    return {
        "transport": transport,
        "config": PushConsumerConfig(
            consumerGroup=group,
            consumeFromWhere=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            rebalanceInterval=CLIENT_PERIOD_MS,
        ),
        "client_config": ClientConfig(
            clientIP=host, instanceName=instance, pollNameServerInterval=CLIENT_PERIOD_MS
        ),
        "run_blocking": inline_blocking,
    }


async def serve(
    consumer: Any, listener: Any, scope: trio.CancelScope, task_status: trio.TaskStatus[None]
) -> None:
    """Run ``consumer`` on TOPIC with ``listener`` until ``scope`` is cancelled."""
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    with scope:
        async with consumer:
            task_status.started()
            await trio.sleep_forever()


class OrderlyDriver:
    """The OrderlyPushConsumer group and its per-queue order check (module docstring)."""

    def __init__(self, checker: ClusterChecker, namesrv: str, transport: object) -> None:
        self.checker = checker
        self.namesrv = namesrv
        self.transport = transport
        self.consumed: dict[bytes, int] = {}
        self.next_offset: dict[tuple[str, int], int] = {}  # (set, queue) -> highest + 1
        self.scope = trio.CancelScope()

    def listener(self, msgs: list[MessageExt], _ctx: object) -> ConsumeOrderlyStatus:
        for m in msgs:
            key = (set_of(m), m.queue_id)
            top = self.next_offset.get(key, 0)
            if m.queue_offset > top:
                self.checker.problems.append(
                    f"orderly group {ORDERLY_GROUP} consumed {key[0]} queue {key[1]} offset "
                    f"{m.queue_offset} before offset {top}: per-queue order broken"
                )
            self.next_offset[key] = max(top, m.queue_offset + 1)
            self.consumed[m.body] = self.consumed.get(m.body, 0) + 1
        self.checker.count("orderly_consumed", len(msgs))
        return ConsumeOrderlyStatus.SUCCESS

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        consumer = OrderlyPushConsumer(
            ORDERLY_GROUP, self.namesrv, **consumer_kwargs(ORDERLY_GROUP, ORDERLY_HOST, "orderly",
                                                           self.transport),
        )  # fmt: skip
        await serve(consumer, self.listener, self.scope, task_status)

    async def drain(self, step: Callable[[], None]) -> None:
        await drain_group(
            self.checker, ORDERLY_GROUP, lambda: missing_bodies(self.checker, self.consumed, {}),
            step,
        )  # fmt: skip
        self.scope.cancel()


class PushDriver:
    def __init__(
        self, checker: ClusterChecker, namesrv: str, transport: object, seed: int, fail_share: float
    ) -> None:
        self.checker = checker
        self.namesrv = namesrv
        self.transport = transport
        self.rng = random.Random(seed ^ PUSH_SALT)
        self.fail_share = fail_share
        self.consumed: dict[bytes, int] = {}
        # body -> (set, its masterEpoch then) of each message answered RECONSUME_LATER
        self.sent_back: dict[bytes, tuple[str, int]] = {}
        self.scope = trio.CancelScope()

    def listener(self, msgs: list[MessageExt]) -> ConsumeStatus:
        for m in msgs:
            if (
                self.fail_share > 0
                and m.reconsume_times == 0
                and m.body not in self.sent_back
                and self.rng.random() < self.fail_share
            ):
                s = set_of(m)
                self.sent_back[m.body] = (s, self.checker.set_epoch(s))
                self.checker.count("push_reconsume_later")
                return ConsumeStatus.RECONSUME_LATER
        for m in msgs:
            n = self.consumed.get(m.body, 0)
            if n:
                self.checker.count("push_duplicates")
            self.consumed[m.body] = n + 1
        self.checker.count("push_consumed", len(msgs))
        return ConsumeStatus.CONSUME_SUCCESS

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        kwargs = consumer_kwargs(PUSH_GROUP, PUSH_HOST, "push", self.transport)
        consumer = PushConsumer(PUSH_GROUP, self.namesrv, **kwargs)
        await serve(consumer, self.listener, self.scope, task_status)

    async def drain(self, step: Callable[[], None]) -> None:
        await drain_group(
            self.checker, PUSH_GROUP,
            lambda: missing_bodies(self.checker, self.consumed, self.sent_back), step,
        )  # fmt: skip
        self.scope.cancel()
