"""Clients of the whole-cluster simulation: the ack tap, producers, a consumer, probes, reads.

- `AckTap` instruments every `Broker` the simulation starts: when its store actor acknowledges
  a master's write (the `GroupTransferService` said ACKED), the tap learns the broker, its set
  and the masterEpoch the write was made in, keyed by (broker address, CommitLog offset) — the
  offset message id a SendResult carries — and tells the checker (one master per epoch).
- `ProducerDriver` runs real `Producer`s (route refresh, retries on another broker: retries
  make duplicates, which are allowed and counted) in a few sender tasks; each message has a
  unique body; every SEND_OK result becomes an acknowledged position for the checker, with the
  masterEpoch the tap saw it acknowledged in; a share of the sends may be batches.
- `ConsumerDriver` pulls (raw PULL_MESSAGE, subscription "*") every queue of every set from a
  random running replica of the set — master, slave or deposed master — and hands the checker
  every (position, body) it received.
- `probe` sends straight to the brokers of a set until one acknowledges (liveness);
  `read_queue` pulls a whole queue from one broker (the final check).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio

from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.broker.ha.group_transfer import AckOutcome
from rocketrio.actors.broker.store.messages import AnyPut, Stored
from rocketrio.actors.client.api import PullStatus, parse_pull_response, request
from rocketrio.actors.client.config import ClientConfig, ProducerConfig
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import Message, SendStatus
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.trace import trace_consumed
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    PULL_FLAG_SUBSCRIPTION,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from rocketrio.protocol.message import MessageDecodeError
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, to_ext
from rocketrio.storage.message_store import BatchPutResult
from tests.harness.clock import EPOCH_MS
from tests.sim.cluster_checks import ClusterChecker
from tests.sim.cluster_nodes import BrokerProc

#: set by run_seed(log_dir=...): producers trace their acknowledged sends and the pulls of the
#: consumer and the final read log what they received (`rocketrio analyze` joins them)
TRACING = False

TOPIC = "SimTopic"
PRODUCER_GROUP = "SimPG"
CONSUMER_GROUP = "SimCG"


def split_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """(broker address, CommitLog offset) of an offset message id (ip, port, offset in hex)."""
    ip = ".".join(str(b) for b in bytes.fromhex(msg_id[:8]))
    return f"{ip}:{int(msg_id[8:16], 16)}", int(msg_id[16:32], 16)


@attrs.frozen(slots=True)
class MasterAck:
    broker: str  # process name + incarnation
    set_name: str
    epoch: int


class AckTap:
    """See module docstring. ``install`` is called for every new Broker object."""

    def __init__(self, checker: ClusterChecker) -> None:
        self.checker = checker
        self.acks: dict[tuple[str, int], MasterAck] = {}
        # (set, epoch) -> (mock-clock ms, controller broker id) of the epoch's first write: the
        # moment the store logged master_first_write (the ground truth `analyze` is checked on)
        self.first_writes: dict[tuple[str, int], tuple[int, int | None]] = {}

    def install(self, proc: BrokerProc, broker: Broker) -> None:
        actor = broker.store.actor
        original = actor.acks.completion
        who = f"{proc.name}#{proc.incarnation}"
        addr = proc.addr

        def completion(
            done: list[tuple[AnyPut, Stored]],
            status: Any,
            remark: str | None,
            started: float,
            epoch_of: Callable[[], int],
        ) -> Callable[[AckOutcome], None]:
            complete = original(done, status, remark, started, epoch_of)
            epoch = (
                actor.replication.epoch
            )  # the epoch the write was made in (the store is master of it)
            rm = broker.roles
            self.first_writes.setdefault(
                (proc.set_name, epoch),
                (int(trio.current_time() * 1000), getattr(rm, "broker_controller_id", None)),
            )

            def tapped(outcome: AckOutcome) -> None:
                if outcome is AckOutcome.ACKED:
                    ack = MasterAck(who, proc.set_name, epoch)
                    self.checker.on_master_ack(proc.set_name, epoch, who)
                    for _put, stored in done:
                        for offset in _commitlog_offsets(stored):
                            self.acks[(addr, offset)] = ack
                complete(outcome)

            return tapped

        actor.acks.completion = completion  # type: ignore[method-assign]

    def lookup(self, msg_id: str) -> MasterAck | None:
        return self.acks.get(split_offset_msg_id(msg_id))


def _commitlog_offsets(stored: Stored) -> list[int]:
    if isinstance(stored, BatchPutResult):
        return list(stored.commitlog_offsets)
    return [r.commitlog_offset for r in stored]


# ---------------------------------------------------------------------------- producers


@attrs.define
class ProducerDriver:
    """Sender tasks over real Producers (see module docstring)."""

    checker: ClusterChecker
    tap: AckTap
    namesrv: str
    transports: Sequence[Any]  # one Transport per producer (its own client host)
    hosts: Sequence[str]
    rng: random.Random
    queues: int
    max_messages: int
    pause_s: tuple[float, float] = (0.02, 0.25)
    sent: int = 0
    seq: int = 0
    batch: bool = False  # SEND_BATCH_MESSAGE of 1-4 messages (SimSpec.batch_sends)
    batch_share: float = 0.0  # or this share of the sends (a seed's ReplicationDraw)

    def _body(self, rng: random.Random) -> bytes:
        self.seq += 1
        head = b"m%06d|" % self.seq
        return head + bytes([97 + self.seq % 26]) * rng.randrange(40, 1500)

    async def run(self, senders_per_producer: int) -> None:
        async with trio.open_nursery() as n:
            for k, (transport, host) in enumerate(zip(self.transports, self.hosts, strict=True)):
                n.start_soon(self._producer, k, transport, host, senders_per_producer)

    async def _producer(self, k: int, transport: Any, host: str, senders: int) -> None:
        rng = random.Random(self.rng.getrandbits(32))
        config = ProducerConfig(
            producerGroup=PRODUCER_GROUP,
            sendMsgTimeout=3000,
            retryTimesWhenSendFailed=2,
            defaultTopicQueueNums=self.queues,
            notAvailableDuration=3000,  # a failed set is retried soon: failovers take seconds
        )
        client_config = ClientConfig(clientIP=host, instanceName=f"p{k}", trace=TRACING)
        producer = Producer(
            PRODUCER_GROUP,
            self.namesrv,
            transport=transport,
            config=config,
            client_config=client_config,
            rng=random.Random(rng.getrandbits(32)),
        )
        async with producer, trio.open_nursery() as n:
            for _ in range(senders):
                n.start_soon(self._sender, producer, random.Random(rng.getrandbits(32)))

    async def _sender(self, producer: Producer, rng: random.Random) -> None:
        while self.sent < self.max_messages:
            # no draw when the share is 0: a seed without batches keeps its run
            if self.batch or (self.batch_share > 0 and rng.random() < self.batch_share):
                await self._send_batch(producer, rng)
                await trio.sleep(rng.uniform(*self.pause_s))
                continue
            self.sent += 1
            body = self._body(rng)
            try:
                result = await producer.send(Message(TOPIC, body))
            except (MQClientError, RemotingError) as e:
                self.checker.count("send_failed")
                del e
            else:
                if result.send_status is SendStatus.SEND_OK:
                    self._acked(result.message_queue.brokerName, result.message_queue.queueId,
                                result.queue_offset, body, result.offset_msg_id)  # fmt: skip
                else:
                    self.checker.count(f"send_{result.send_status.value}")
            await trio.sleep(rng.uniform(*self.pause_s))

    async def _send_batch(self, producer: Producer, rng: random.Random) -> None:
        """One batch: acknowledged as a whole, its messages at consecutive queue offsets of one
        queue, each with its own offset message id."""
        bodies = [self._body(rng) for _ in range(rng.randint(1, 4))]
        self.sent += len(bodies)
        try:
            results = await producer.send_batch([Message(TOPIC, b) for b in bodies])
        except (MQClientError, RemotingError):
            self.checker.count("send_failed")
            return
        (result,) = results  # small bodies: one request
        if result.send_status is not SendStatus.SEND_OK:
            self.checker.count(f"send_{result.send_status.value}")
            return
        ids = result.offset_msg_id.split(",")
        mq = result.message_queue
        for i, body in enumerate(bodies):
            self._acked(mq.brokerName, mq.queueId, result.queue_offset + i, body, ids[i])
        self.checker.count("batches_acked")

    def _acked(self, set_name: str, qid: int, qoffset: int, body: bytes, msg_id: str) -> None:
        ack = self.tap.lookup(msg_id)
        how = f"SEND_OK {msg_id[16:]}" + (
            f" by {ack.broker} epoch {ack.epoch}" if ack else " (no master ack seen)"
        )
        if ack is None:
            self.checker.problems.append(
                f"SEND_OK for {body[:12]!r} at {set_name} {qid}@{qoffset} without an "
                f"acknowledged write at {split_offset_msg_id(msg_id)}"
            )
        self.checker.count("acked")
        epoch = None if ack is None else ack.epoch
        self.checker.on_send_ok((set_name, TOPIC, qid, qoffset), body, how, epoch)


# ---------------------------------------------------------------------------- consumer


def pull_header(queue_id: int, offset: int, max_msgs: int = 32) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumerGroup=CONSUMER_GROUP,
        topic=TOPIC,
        queueId=queue_id,
        queueOffset=offset,
        maxMsgNums=max_msgs,
        sysFlag=PULL_FLAG_SUBSCRIPTION,
        commitOffset=0,
        suspendTimeoutMillis=0,
        subVersion=0,
        subscription="*",
        expressionType="TAG",
    )


async def pull_once(
    client: RemotingClient,
    addr: str,
    queue_id: int,
    offset: int,
    timeout_s: float = 2.0,
    *,
    trace: tuple[str, str] | None = None,
) -> tuple[PullStatus, int, list[tuple[int, bytes]]] | None:
    """One PULL_MESSAGE; None when it failed (no answer, refused, undecodable). With
    `TRACING`, ``trace`` = (group, set name) logs a trace_consumed line per message."""
    try:
        resp = await client.invoke(
            addr, request(RequestCode.PULL_MESSAGE, pull_header(queue_id, offset)), timeout_s
        )
        result = parse_pull_response(resp, addr)
        got = result.messages()
        msgs = [(m.queue_offset, m.body) for m in got]
    except (RemotingError, MQClientError, MessageDecodeError, HeaderError):
        return None
    if TRACING and trace is not None:
        group, set_name = trace
        trace_consumed(group, "sim", MessageQueue(TOPIC, set_name, queue_id), got)
    return result.status, result.next_begin_offset, msgs


@attrs.define
class ConsumerDriver:
    checker: ClusterChecker
    client: RemotingClient
    brokers: Callable[[str], list[BrokerProc]]  # set name -> its broker processes
    sets: Sequence[str]
    queues: int
    rng: random.Random
    next_offset: dict[tuple[str, int], int] = attrs.field(factory=dict)

    async def run(self) -> None:
        async with trio.open_nursery() as n:
            for s in self.sets:
                n.start_soon(self._consume_set, s, random.Random(self.rng.getrandbits(32)))

    async def _consume_set(self, set_name: str, rng: random.Random) -> None:
        while True:
            await trio.sleep(rng.uniform(0.2, 0.6))
            up = [p for p in self.brokers(set_name) if p.up]
            if not up:
                continue
            proc = up[min(int(rng.random() * len(up)), len(up) - 1)]
            qid = rng.randrange(self.queues)
            key = (set_name, qid)
            offset = self.next_offset.get(key, 0)
            got = await pull_once(
                self.client, proc.addr, qid, offset, trace=(CONSUMER_GROUP, set_name)
            )
            if got is None:
                continue
            status, _next, msgs = got
            if status is not PullStatus.FOUND:
                continue
            source = f"{proc.name}#{proc.incarnation}"
            for qoffset, body in msgs:
                self.checker.on_received((set_name, TOPIC, qid, qoffset), body, source)
                if qoffset >= offset:
                    offset = qoffset + 1
            self.checker.count("consumed", len(msgs))
            self.next_offset[key] = offset


# ---------------------------------------------------------------------------- probes, reads


def send_request(body: bytes, queue_id: int = 0) -> RemotingCommand:
    v1 = SendMessageRequestHeader(
        producerGroup=PRODUCER_GROUP, topic=TOPIC, defaultTopic="TBW102",
        defaultTopicQueueNums=4, queueId=queue_id, sysFlag=0, bornTimestamp=EPOCH_MS, flag=0,
    )  # fmt: skip
    header = to_ext(SendMessageRequestHeaderV2.from_v1(v1))
    return RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=header, body=body)


async def probe(
    client: RemotingClient,
    checker: ClusterChecker,
    tap: AckTap,
    set_name: str,
    procs: Sequence[BrokerProc],
    body: bytes,
) -> bool:
    """Send ``body`` to each running broker of the set once; True when one acknowledged it."""
    for proc in procs:
        if not proc.up:
            continue
        try:
            resp = await client.invoke(proc.addr, send_request(body), 3.0)
        except RemotingError:
            continue
        if resp.code != ResponseCode.SUCCESS:
            continue
        h = from_ext(SendMessageResponseHeader, resp.ext_fields)
        ack = tap.lookup(h.msgId)
        how = f"probe to {proc.name}" + (f" epoch {ack.epoch}" if ack else "")
        epoch = None if ack is None else ack.epoch
        checker.on_send_ok((set_name, TOPIC, h.queueId, h.queueOffset), body, how, epoch)
        return True
    return False


async def read_queue(
    client: RemotingClient, addr: str, queue_id: int, set_name: str = ""
) -> dict[int, bytes] | None:
    """Every message of the queue on the broker at ``addr`` (None: a pull failed)."""
    out: dict[int, bytes] = {}
    offset = 0
    for _ in range(10_000):
        got = await pull_once(
            client, addr, queue_id, offset, timeout_s=5.0, trace=("final-read", set_name)
        )
        if got is None:
            return None
        status, next_begin, msgs = got
        if status is not PullStatus.FOUND:
            return out
        for qoffset, body in msgs:
            out[qoffset] = body
        if next_begin <= offset:
            return out
        offset = next_begin
    return out
