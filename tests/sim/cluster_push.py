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
  (`OffsetWatch`, docs/metadata-failover.md): see its docstring.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import trio

from rocketrio.actors.client.config import ClientConfig, ConsumeFromWhere, PushConsumerConfig
from rocketrio.actors.client.message import ConsumeStatus
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.protocol.message_format import MessageExt
from tests.harness.blocking import inline_blocking
from tests.sim.cluster_checks import ClusterChecker
from tests.sim.cluster_clients import TOPIC
from tests.sim.replication_draw import SETS

PUSH_GROUP = "SimPush"
PUSH_HOST = "10.0.9.70"
PUSH_SALT = 0x9054  # the listener's RNG: seed ^ PUSH_SALT
# after the final checks: a retry's delay level 3 (10 s), its topic's route and the rebalance
# that assigns its queue (both polled every CLIENT_PERIOD_MS), a pull's long poll (15 s) and a
# failed send-back consumed again locally (5 s)
DRAIN_BOUND_S = 60.0
CLIENT_PERIOD_MS = 3000


def set_of(msg: MessageExt) -> str:
    """The broker set that stored the message (its store host is 10.0.<set + 2>.x)."""
    return SETS[int(msg.store_host.split(".")[2]) - 2]


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
        config = PushConsumerConfig(
            consumerGroup=PUSH_GROUP,
            consumeFromWhere=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            rebalanceInterval=CLIENT_PERIOD_MS,
        )
        client_config = ClientConfig(
            clientIP=PUSH_HOST, instanceName="push", pollNameServerInterval=CLIENT_PERIOD_MS
        )
        consumer = PushConsumer(
            PUSH_GROUP,
            self.namesrv,
            transport=self.transport,  # type: ignore[arg-type]
            config=config,
            client_config=client_config,
            run_blocking=inline_blocking,
        )
        consumer.subscribe(TOPIC, "*")
        consumer.register_listener(self.listener)
        with self.scope:
            async with consumer:
                task_status.started()
                await trio.sleep_forever()

    def missing(self) -> list[bytes]:
        """Acknowledged bodies the group has not consumed and is still expected to."""
        c = self.checker
        out = []
        for body in c.acked.values():
            if body in self.consumed:
                continue
            back = self.sent_back.get(body)
            if back is not None and back[0] in c.weak_sets and c.set_epoch(back[0]) > back[1]:
                continue  # its retry copy was acknowledged under the weak rule, then a failover
            out.append(body)
        return out

    async def drain(self, step: Callable[[], None]) -> None:
        """Bounded wait until the group consumed every acknowledged message (at least once)."""
        deadline = trio.current_time() + DRAIN_BOUND_S
        self.checker.note("draining the push consumer")
        while missing := self.missing():
            if trio.current_time() > deadline:
                c = self.checker
                where = [p for p, b in c.acked.items() if b == missing[0]]
                self.checker.fail(
                    f"acknowledged but never consumed by the push consumer group: "
                    f"{len(missing)} message(s), e.g. {missing[0][:12]!r} at {where} "
                    f"({', '.join(c.acked_by[p] for p in where)}); sent back: "
                    f"{self.sent_back.get(missing[0])}; {DRAIN_BOUND_S}s after the final checks"
                )
            step()
            await trio.sleep(0.5)
        self.checker.count("push_drained")
        self.scope.cancel()
