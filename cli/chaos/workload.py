"""The chaos workload: every kind of producer and consumer of the project's own client, traced
(``ClientConfig.trace``), on four fresh topics of the run (``Chaos<run>-Normal`` ...).

Producers: sync, async and batch sends (Normal), ordered sends per message group with a queue
selector, each group's next message sent only once the previous one is acknowledged (Order),
delayed sends (delay level 1, 1 s: Delay), transactional sends, every third one rolled back
(Txn). Consumers: a push and a POP group on Normal, an orderly group on Order, push groups on
Delay and Txn; once the run is over, a new group reads every topic from its first offset (the
"final read": a message consumed live but lost from the brokers since shows up missing). The
clients write the trace lines (``trace_send_acked``, ``trace_consumed``; the POP loop writes its
own with the same record) into chaos's log; `intents` keeps what the trace cannot say (message
group and sequence, delay, transaction outcome), keyed by message id.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Any

import structlog
import trio

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.message import ConsumeStatus, Message
from rocketrio.actors.client.orderly import ConsumeOrderlyStatus
from rocketrio.actors.client.orderly_consumer import OrderlyPushConsumer
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.actors.client.remoting import ClientTransport
from rocketrio.actors.client.simple_consumer import SimpleConsumer
from rocketrio.actors.client.transaction_producer import (
    LocalTransactionState,
    TransactionProducer,
)
from rocketrio.actors.observe import events
from rocketrio.cli.chaos.history import Intent, TopicSpec
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt

QUEUES = 4
PERM_RW = 6
DELAY_LEVEL, DELAY_MS = 1, 1000  # messageDelayLevel's first level: 1 s
MESSAGE_GROUPS = 8
ROLLBACK_EVERY = 3
FIRST = "CONSUME_FROM_FIRST_OFFSET"

log = structlog.get_logger("trace")


def _by_group(mqs: Sequence[MessageQueue], _msg: Any, key: Any) -> MessageQueue:
    return sorted(mqs, key=lambda q: (q.brokerName, q.queueId))[int(key[1:]) % len(mqs)]


class Counters:
    def __init__(self) -> None:
        self.acked: collections.Counter[str] = collections.Counter()
        self.failed: collections.Counter[str] = collections.Counter()
        self.consumed: collections.Counter[str] = collections.Counter()
        self.last_error = ""

    def fail(self, kind: str, e: BaseException) -> None:
        self.failed[kind] += 1
        self.last_error = f"{kind}: {type(e).__name__}: {e}"[:160]


class Workload:
    def __init__(
        self, namesrv: str, run_id: str, rate: float, transport: ClientTransport | None = None
    ) -> None:
        self.ns = namesrv
        self.transport = transport  # None: TCP (tests pass the simulated network's)
        self.run_id = run_id
        self.period_s = 1.0 / rate
        self.topic = {k: f"Chaos{run_id}-{k}" for k in ("Normal", "Order", "Delay", "Txn")}
        groups = ("push", "pop", "orderly", "delay", "txn", "final")
        self.group = {k: f"chaos{run_id}_{k}" for k in groups}
        self.intents: dict[str, Intent] = {}
        self.counters = Counters()
        self.producing = True
        self.txn_producer: TransactionProducer | None = None

    def specs(self, final: bool = False) -> list[TopicSpec]:
        """The topics and the groups that must read all of them; ``final``: with the group
        that reads every topic from its first offset once the run is over."""
        t, g = self.topic, self.group
        f = (g["final"],) if final else ()
        return [
            TopicSpec(t["Normal"], QUEUES, QUEUES, PERM_RW, (g["push"], g["pop"], *f)),
            TopicSpec(t["Order"], QUEUES, QUEUES, PERM_RW, (g["orderly"], *f), (g["orderly"],)),
            TopicSpec(t["Delay"], QUEUES, QUEUES, PERM_RW, (g["delay"], *f)),
            TopicSpec(t["Txn"], QUEUES, QUEUES, PERM_RW, (g["txn"], *f), needs_intent=True),
        ]

    def _kw(self) -> dict[str, Any]:
        return {
            "client_config": ClientConfig(namesrvAddr=self.ns, trace=True),
            "transport": self.transport,
        }

    # ------------------------------------------------------------------ producers

    async def _loop(self, kind: str, once: Callable[[int], Any]) -> None:
        i = 0
        while self.producing:
            try:
                await once(i)
            except Exception as e:  # a send failed for good: counted, the loop goes on
                self.counters.fail(kind, e)
                await trio.sleep(0.1)
            i += 1
            await trio.sleep(self.period_s)

    async def run_producers(self) -> None:
        t = self.topic
        tp = self.txn_producer
        assert tp is not None, "run_consumers opens the transaction producer first"
        async with (
            Producer(f"chaos{self.run_id}_p", self.ns, **self._kw()) as p,
            trio.open_nursery() as n,
        ):

            async def sync(i: int) -> None:
                await p.send(Message(t["Normal"], f"sync-{i}".encode()))
                self.counters.acked["sync"] += 1

            def on_async(fut: Any) -> None:
                exc = fut.exception()
                if exc is None:
                    self.counters.acked["async"] += 1
                else:
                    self.counters.fail("async", exc)

            async def async_(i: int) -> None:
                await p.send_async(Message(t["Normal"], f"async-{i}".encode()), on_async)

            async def batch(i: int) -> None:
                msgs = [Message(t["Normal"], f"batch-{i}-{j}".encode()) for j in range(4)]
                await p.send_batch(msgs)
                self.counters.acked["batch"] += 4

            async def delayed(i: int) -> None:
                r = await p.send(
                    Message(t["Delay"], f"delay-{i}".encode(), delay_time_level=DELAY_LEVEL)
                )
                self.intents[r.msg_id] = Intent(r.msg_id, delay_ms=DELAY_MS)
                self.counters.acked["delay"] += 1

            async def txn(i: int) -> None:
                rollback = i % ROLLBACK_EVERY == 0
                body = f"txn-{i}-{'rollback' if rollback else 'commit'}".encode()
                r = await tp.send_message_in_transaction(Message(t["Txn"], body))
                self.intents[r.msg_id] = Intent(r.msg_id, rollback=rollback)
                self.counters.acked["txn"] += 1

            for kind, fn in (("sync", sync), ("async", async_), ("batch", batch),
                             ("delay", delayed), ("txn", txn)):  # fmt: skip
                n.start_soon(self._loop, kind, fn)
            n.start_soon(self._ordered, p)

    async def _ordered(self, p: Producer) -> None:
        """Message group k<i>: seq n+1 is sent once seq n is acknowledged (retried until)."""
        seqs = [0] * MESSAGE_GROUPS
        i = 0
        while self.producing:
            key = f"k{i % MESSAGE_GROUPS}"
            seq = seqs[i % MESSAGE_GROUPS]
            msg = Message(self.topic["Order"], f"{key}-{seq}".encode(), keys=key)
            try:
                r = await p.send(msg, queue_selector=_by_group, arg=key)
            except Exception as e:  # not acknowledged: the same seq again (a retry)
                self.counters.fail("ordered", e)
                await trio.sleep(0.1)
                continue
            self.intents[r.msg_id] = Intent(r.msg_id, key=key, seq=seq)
            self.counters.acked["ordered"] += 1
            seqs[i % MESSAGE_GROUPS] += 1
            i += 1
            await trio.sleep(self.period_s)

    # ------------------------------------------------------------------ consumers

    def _push_listener(self, name: str) -> Callable[[list[MessageExt]], ConsumeStatus]:
        def on_msgs(msgs: list[MessageExt]) -> ConsumeStatus:
            self.counters.consumed[name] += len(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        return on_msgs

    async def run_consumers(self, task_status: trio.TaskStatus[None]) -> None:
        t, g = self.topic, self.group
        push = PushConsumer(g["push"], self.ns, consume_from_where=FIRST, **self._kw())
        push.subscribe(t["Normal"])
        push.register_listener(self._push_listener("push"))
        orderly = OrderlyPushConsumer(g["orderly"], self.ns, consume_from_where=FIRST, **self._kw())
        orderly.subscribe(t["Order"])

        def on_orderly(msgs: list[MessageExt], _ctx: Any) -> ConsumeOrderlyStatus:
            self.counters.consumed["orderly"] += len(msgs)
            return ConsumeOrderlyStatus.SUCCESS

        orderly.register_listener(on_orderly)
        delay = PushConsumer(g["delay"], self.ns, consume_from_where=FIRST, **self._kw())
        delay.subscribe(t["Delay"])
        delay.register_listener(self._push_listener("delay"))
        txn = PushConsumer(g["txn"], self.ns, consume_from_where=FIRST, **self._kw())
        txn.subscribe(t["Txn"])
        txn.register_listener(self._push_listener("txn"))
        # The transaction producer lives as long as the consumers, not the producers: a commit
        # is one-way (END_TRANSACTION), and one lost in a fault is resolved only when the
        # broker's check (every transactionCheckInterval) reaches a producer of the group, which
        # may be well after the last send.
        tp = TransactionProducer(f"chaos{self.run_id}_tx", self.ns, _TxnListener(), **self._kw())
        async with tp, push, orderly, delay, txn, trio.open_nursery() as n:
            self.txn_producer = tp
            n.start_soon(self._pop)
            task_status.started()
            await trio.sleep_forever()

    async def run_final(self, task_status: trio.TaskStatus[None]) -> None:
        """A new group reading every topic from its first offset: what the brokers hold now.
        A message consumed live and lost since (acknowledged by a master that had not
        replicated it, say, then cut when that master came back as a slave) is missing here."""
        c = PushConsumer(self.group["final"], self.ns, consume_from_where=FIRST, **self._kw())
        for topic in self.topic.values():
            c.subscribe(topic)
        c.register_listener(self._push_listener("final"))
        async with c:
            task_status.started()
            await trio.sleep_forever()

    async def _pop(self) -> None:
        """The POP group: receive, trace, ack; a failed ack comes back after the invisible
        time (a duplicate, as POP promises at-least-once)."""
        name = self.group["pop"]
        async with SimpleConsumer(name, self.ns, **self._kw()) as c:
            c.subscribe(self.topic["Normal"])
            while True:
                try:
                    msgs = await c.receive(16, invisible_duration=10.0, await_duration=2.0)
                except Exception as e:  # mid-failover: try again shortly
                    self.counters.fail("pop-receive", e)
                    await trio.sleep(0.5)
                    continue
                for m in msgs:
                    events.emit(
                        log,
                        events.TraceConsumed(
                            msg_id=m.msg_id, topic=m.topic, broker=m.broker_name,
                            queue_id=m.queue_id, queue_offset=m.queue_offset, group=name,
                            client_id=c.client.client_id, reconsume_times=m.delivery_attempt - 1,
                        ),
                    )  # fmt: skip
                self.counters.consumed["pop"] += len(msgs)
                if msgs:
                    try:
                        await c.ack_batch(msgs)
                    except Exception as e:  # they come back after invisible_duration
                        self.counters.fail("pop-ack", e)


class _TxnListener:
    """Commit or roll back by the message's body; a check answers the same."""

    @staticmethod
    def _state(body: bytes) -> LocalTransactionState:
        if body.endswith(b"rollback"):
            return LocalTransactionState.ROLLBACK_MESSAGE
        return LocalTransactionState.COMMIT_MESSAGE

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return self._state(msg.body)

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return self._state(msg.body)
