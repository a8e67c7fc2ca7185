"""A SimpleConsumer (RocketMQ 5's stateless consumer) over POP: receive, ack, change invisible
duration.

``async with SimpleConsumer("G", "ns:9876") as c: c.subscribe("T", "a||b"); msgs = await
c.receive(16, 30.0); await c.ack(msgs[0])``.

`receive` sends POP_MESSAGE (queueId -1: any queue) to the master of one broker set of the
topic's route at a time, round robin across the sets that have readable queues, with pollTime
``await_duration`` (long polling: the broker answers when a message arrives). Each received
message carries its receipt handle (the POP_CK extraInfo, built from the response header exactly
as upstream's client builds it, see `receipts_of`) and the broker set it came from; `ack`,
`ack_batch` (BATCH_ACK_MESSAGE) and `change_invisible_duration` go back to that broker's
master. A message that is neither acked
nor changed becomes visible again after its invisible duration (the broker's revive service
puts it to the group's pop retry topic), so consumption is at least once.

Failover (issue 26: the POP group stalled up to 27 s after a master hung, push groups ~5 s):
a hung master keeps its connections open, and nothing refreshed this consumer's route, so
every POP went to it and was waited out (timeout + await) until the 30 s route poll. Now every
request is watched (`stuck_sends.RequestWatch`, one loop per client; `invoke_watched` for a
request that must connect first): unanswered ``STUCK_AFTER_S`` past its await
(the broker answers a long poll by then) it asks for the route every 0.1 s and is given up as
soon as the route names another master of its broker set; a POP is then sent to the new master
at once (nothing was popped at the old one), an ack or change fails (the message comes back
after its invisible time). A failure that says the broker is gone refreshes the route too, and
a POP whose connection failed (a killed master) goes to the new master once the refreshed route
names one. A long poll that ended empty refreshes the route before `receive` returns (at most
one query per await): a deposed master the clients still reach (cut from its cluster only), or
the slave it became, answers every POP empty without failing. Bound: POP resumes at most
await + 0.7 s (+ round trips) after the route names the new master, one route query interval
after a kill (docs/failover.md).

With ``order=True`` (upstream's FIFO consumption, POP_MESSAGE order=true) the broker hands out
a queue's next messages only once every message it handed out of that queue before was acked
(or its invisible time ended: then the same messages come again, in the same order, their
``delivery_attempt`` counted up from the response's orderCountInfo). Ack them in order:
the group's offset moves past a message only when every earlier one of its batch is acked.

`receipts_of` is pure: given the response header fields and the decoded messages it returns
the receipts; tests compare it with upstream's format.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import attrs
import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.pull_api import broker_gone
from rocketrio.actors.client.remoting import ClientTransport as Transport
from rocketrio.actors.client.remoting import RemotingError
from rocketrio.actors.client.stuck_sends import (
    STUCK_AFTER_S,
    MasterChanged,
    PendingSend,
    invoke_watched,
)
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import PERM_READ
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.message import MessageExt, iter_stored
from rocketrio.protocol.pop_checkpoint import BatchAck, BatchAckMessageRequestBody
from rocketrio.protocol.pop_extra_info import (
    INIT_MODE_MAX,
    POP_ORDER_REVIVE_QUEUE,
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
    ExtraInfo,
    offset_info_key,
    order_count_of,
    parse_msg_offset_info,
    parse_order_count_info,
    parse_start_offset_info,
    retry_flag,
)
from rocketrio.protocol.pop_headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext

MAX_RECEIVE = 32  # the broker refuses more per POP
# after a POP's connection failed, how long to wait for the refreshed route (a few queries)
GONE_REFRESH_WAIT_S = 0.5
# a POP that found nothing
# a POP's answers that mean "no message" (not an error)
EMPTY_POP_CODES = (
    ResponseCode.POLLING_TIMEOUT,
    ResponseCode.POLLING_FULL,
    ResponseCode.PULL_NOT_FOUND,
)

log = structlog.get_logger("client")


@attrs.define
class ReceivedMessage:
    """A popped message: ``receipt_handle`` (extraInfo) is what ack / change use."""

    message: MessageExt
    topic: str  # the subscribed topic (a revived message arrives under it too)
    broker_name: str
    receipt_handle: str

    @property
    def body(self) -> bytes:
        return self.message.body

    @property
    def msg_id(self) -> str:
        return self.message.msg_id

    @property
    def delivery_attempt(self) -> int:
        return self.message.reconsume_times + 1

    @property
    def queue_id(self) -> int:
        return self.message.queue_id

    @property
    def queue_offset(self) -> int:
        return self.message.queue_offset


def receipts_of(
    header: PopMessageResponseHeader, msgs: list[MessageExt], broker_name: str
) -> list[str]:
    """The POP_CK receipt of each message, as upstream's processPopResponse builds it: the
    broker's POP_CK property when present (revived messages), else from startOffsetInfo and
    msgOffsetInfo of the message's (retry mark, queueId)."""
    starts = parse_start_offset_info(header.startOffsetInfo)
    offsets = parse_msg_offset_info(header.msgOffsetInfo)
    # `ExtraInfo.build`'s text, written out: the fields after the checkpoint's start offset
    # that are the same for the whole response, then per message its retry mark and queue
    pop = f"{header.popTime} {header.invisibleTime} {header.reviveQid}"
    out = []
    for m in msgs:
        given = m.properties.get(PROPERTY_POP_CK)
        if given is not None:
            out.append(given)
            continue
        key = offset_info_key(m.topic, m.queue_id)
        if key not in starts or m.queue_offset not in offsets.get(key, ()):
            raise MQClientError(
                f"pop response names no checkpoint for {m.topic}@{m.queue_id}:{m.queue_offset}"
            )
        retry, qid, offset = retry_flag(m.topic), m.queue_id, m.queue_offset
        out.append(f"{starts[key]} {pop} {retry} {broker_name} {qid} {offset}")
    return out


def popped_messages(
    resp: RemotingCommand, topic: str, broker_name: str, order: bool
) -> list[ReceivedMessage]:
    """The messages of a successful POP_MESSAGE response of ``broker_name``, each with its
    receipt (`receipts_of`), its first pop time and, popped in order, its delivery count."""
    rh = from_ext(PopMessageResponseHeader, resp.ext_fields)
    msgs = list(iter_stored(resp.body))
    counts = parse_order_count_info(rh.orderCountInfo) if order else {}
    first_pop = str(rh.popTime)
    out = []
    for m, receipt in zip(msgs, receipts_of(rh, msgs, broker_name), strict=True):
        if counts:
            count = order_count_of(counts, m.topic, m.queue_id, m.queue_offset)
            if count > 0:  # upstream's client: an ordered message's delivery count
                m.reconsume_times = count
        m.properties.setdefault(PROPERTY_FIRST_POP_TIME, first_pop)
        out.append(ReceivedMessage(m, topic, broker_name, receipt))
    return out


class SimpleConsumer:
    """RocketMQ 5's stateless consumer over POP: `subscribe`, `receive` a batch, `ack` each
    message (or `change_invisible_duration`); an unacked message comes back after its invisible
    time. ``order=True`` consumes FIFO. Runs on asyncio or Trio.
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str],
        *,
        transport: Transport | None = None,
        client_config: ClientConfig | None = None,
        client: MQClientInstance | None = None,
        await_duration: float = 20.0,
        init_mode: int = INIT_MODE_MAX,
        timeout: float = 3.0,
        order: bool = False,
    ) -> None:
        self.group = group
        self.order = order
        self.await_duration = await_duration
        self.init_mode = init_mode
        self.timeout = timeout
        self._own_client = client is None
        self.client = client or MQClientInstance(
            namesrv_addr, transport=transport, config=client_config
        )
        self.subscriptions: dict[str, str] = {}
        self.sql_topics: set[str] = set()  # topics subscribed with a SQL92 selector
        self._turn = itertools.count()

    async def __aenter__(self) -> SimpleConsumer:
        if self._own_client:
            await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._own_client:
            await self.client.__aexit__(*exc)

    def subscribe(self, topic: str, expression: str = "*", *, sql: str | None = None) -> None:
        """Subscribe by tags (``expression``) or by a SQL92 selector (``sql``)."""
        self.subscriptions[topic] = expression if sql is None else sql
        if sql is None:
            self.sql_topics.discard(topic)
        else:
            self.sql_topics.add(topic)
        self.client.watch_topic(topic)

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)

    async def _readable_brokers(self, topic: str) -> list[str]:
        route = self.client.routes.get(topic) or await self.client.update_route(topic)
        if route is None:
            raise MQClientError(f"no route for topic {topic}")
        return sorted(
            {q.brokerName for q in route.queueDatas if q.perm & PERM_READ and q.readQueueNums}
        )

    async def _invoke(
        self, topic: str, broker_name: str, addr: str, cmd: RemotingCommand, wait: float = 0.0
    ) -> RemotingCommand:
        """The request at ``addr``, the master of ``broker_name`` in the cached route: given up
        with `MasterChanged` once it is unanswered ``STUCK_AFTER_S`` past its await and the
        route names another master (a hung master keeps its connections open, so only its
        timeout would end it); a failure that says the broker is gone refreshes the route, so
        the next request goes to the new master (module docstring)."""
        pending = PendingSend(topic, broker_name, addr, aio.current_time())
        remoting = self.client.remoting
        watch = self.client.request_watch()
        stuck_after_s = wait + STUCK_AFTER_S
        try:
            if watch is not None:
                return await watch.invoke(
                    remoting.begin_nowait, remoting.begin, pending, cmd, self.timeout + wait,
                    stuck_after_s=stuck_after_s,
                )  # fmt: skip
            return await invoke_watched(
                remoting.begin,
                self.client.find_master_addr,
                self.client.request_route_refresh,
                pending,
                cmd,
                self.timeout + wait,
                stuck_after_s=stuck_after_s,
            )
        except MasterChanged as e:
            events.emit(log, events.PopMoved(group=self.group, topic=topic, old=addr, error=str(e)))
            raise
        except (RemotingError, MQClientError) as e:
            if broker_gone(e):
                self.client.request_route_refresh(topic)
            raise

    async def receive(
        self,
        max_messages: int = 16,
        invisible_duration: float = 30.0,
        await_duration: float | None = None,
        *,
        order: bool | None = None,
    ) -> list[ReceivedMessage]:
        """Up to ``max_messages`` (<= 32) messages of the subscribed topics, waiting up to
        ``await_duration`` seconds for one to arrive; [] when none came. ``order`` overrides
        the consumer's."""
        if not self.subscriptions:
            raise MQClientError("subscribe to a topic before receive")
        if not 0 < max_messages <= MAX_RECEIVE:
            raise MQClientError(f"max_messages must be 1..{MAX_RECEIVE}, got {max_messages}")
        topics = sorted(self.subscriptions)
        turn = next(self._turn)
        topic = topics[turn % len(topics)]
        brokers = await self._readable_brokers(topic)
        if not brokers:
            return []
        wait = self.await_duration if await_duration is None else await_duration
        # one long poll at a time: the others are asked without waiting first
        for i in range(len(brokers)):
            name = brokers[(turn + i) % len(brokers)]
            last = i == len(brokers) - 1
            got = await self._pop(
                topic, name, max_messages, invisible_duration, wait if last else 0.0, order
            )
            if got:
                return got
        return []

    async def receive_from(
        self,
        topic: str,
        broker_name: str,
        max_messages: int,
        invisible: float,
        wait: float,
        *,
        order: bool | None = None,
        attempt_id: str | None = None,
    ) -> list[ReceivedMessage]:
        """Like `receive`, from one broker set (the gRPC proxy's ReceiveMessage names it);
        ``order`` overrides the consumer's, ``attempt_id`` is the client's receive attempt (an
        ordered receive retried with it gets the same batch)."""
        if not 0 < max_messages <= MAX_RECEIVE:
            raise MQClientError(f"max_messages must be 1..{MAX_RECEIVE}, got {max_messages}")
        self.subscriptions.setdefault(topic, "*")
        return await self._pop(
            topic,
            broker_name,
            max_messages,
            invisible,
            wait,
            self.order if order is None else order,
            attempt_id,
        )

    async def _pop(
        self,
        topic: str,
        broker_name: str,
        max_messages: int,
        invisible: float,
        wait: float,
        order: bool | None = None,
        attempt_id: str | None = None,
    ) -> list[ReceivedMessage]:
        order = self.order if order is None else order
        header = PopMessageRequestHeader(
            consumerGroup=self.group,
            topic=topic,
            queueId=-1,
            maxMsgNums=max_messages,
            invisibleTime=math.ceil(invisible * 1000),
            pollTime=round(wait * 1000),
            bornTime=wallclock_ms(),
            initMode=self.init_mode,
            expType="SQL92" if topic in self.sql_topics else "TAG",
            exp=self.subscriptions.get(topic, "*"),
            order=order or None,
            attemptId=attempt_id,
        )
        addr, resp = await self._pop_at_master(topic, broker_name, to_ext(header), wait)
        if resp is None:
            return []
        if resp.code in EMPTY_POP_CODES:
            if wait > 0:
                # a long poll that ended empty: a deposed master the clients still reach (cut
                # from its cluster only), or the slave it became, answers so forever; check the
                # route (one query per await at most) so the next POP goes to the new master
                await self.client.refresh_route(topic, aio.current_time() + GONE_REFRESH_WAIT_S)
            return []
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        return popped_messages(resp, topic, broker_name, bool(order))

    async def _pop_at_master(
        self, topic: str, broker_name: str, ext: dict[str, str], wait: float
    ) -> tuple[str, RemotingCommand | None]:
        """POP_MESSAGE at the set's master; at the new master at once when the route named one
        while the POP was parked at the old (nothing was popped there) or once the old one's
        connection failed (a killed master: popped or not, the messages are at least once).
        None: the route names no master."""
        addr = await self.client.find_master_addr_refreshing(broker_name, topic)
        if addr is None:
            return "", None
        cmd = RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=dict(ext))
        try:
            return addr, await self._invoke(topic, broker_name, addr, cmd, wait)
        except MasterChanged:
            pass
        except RemotingError:
            await self.client.refresh_route(topic, aio.current_time() + GONE_REFRESH_WAIT_S)
            if self.client.find_master_addr(broker_name) == addr:
                raise
        new = self.client.find_master_addr(broker_name)
        if new is None:
            return "", None
        cmd = RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=dict(ext))
        return new, await self._invoke(topic, broker_name, new, cmd, wait)

    async def _broker_of(self, msg: ReceivedMessage) -> str:
        addr = await self.client.find_master_addr_refreshing(msg.broker_name, msg.topic)
        if addr is None:
            raise MQClientError(f"no master of broker {msg.broker_name} to acknowledge at")
        return addr

    async def ack(self, msg: ReceivedMessage) -> None:
        """Acknowledge: the message is never delivered again to this group."""
        cmd = ack_command(self.group, msg)
        addr = await self._broker_of(msg)
        resp = await self._invoke(msg.topic, msg.broker_name, addr, cmd)
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)

    async def ack_batch(self, msgs: list[ReceivedMessage]) -> None:
        """Acknowledge many messages with BATCH_ACK_MESSAGE: one request per broker, one bit
        set per checkpoint (upstream's batch ack, `batch_ack_body`)."""
        by_broker: dict[str, list[tuple[str, ExtraInfo, int]]] = {}
        for m in msgs:
            e = ExtraInfo.parse(m.receipt_handle)
            offset = e.queue_offset if e.queue_offset is not None else m.queue_offset
            by_broker.setdefault(m.broker_name, []).append((m.topic, e, offset))
        for broker_name, acked in by_broker.items():
            topic = acked[0][0]
            addr = await self.client.find_master_addr_refreshing(broker_name, topic)
            if addr is None:
                raise MQClientError(f"no master of broker {broker_name} to acknowledge at")
            body = batch_ack_body(self.group, broker_name, acked)
            resp = await self._invoke(
                topic, broker_name, addr, RemotingCommand(RequestCode.BATCH_ACK_MESSAGE, body=body)
            )
            if resp.code != ResponseCode.SUCCESS:
                raise MQBrokerError(resp.code, resp.remark, addr)

    async def change_invisible_duration(self, msg: ReceivedMessage, duration: float) -> None:
        """Make the message invisible for ``duration`` seconds from now (longer or shorter);
        ``msg.receipt_handle`` is replaced by the new receipt."""
        extra = ExtraInfo.parse(msg.receipt_handle)
        offset = extra.queue_offset if extra.queue_offset is not None else msg.queue_offset
        header = ChangeInvisibleTimeRequestHeader(
            consumerGroup=self.group,
            topic=msg.topic,
            queueId=extra.queue_id,
            extraInfo=msg.receipt_handle,
            offset=offset,
            invisibleTime=math.ceil(duration * 1000),
        )
        addr = await self._broker_of(msg)
        cmd = RemotingCommand(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ext_fields=to_ext(header))
        resp = await self._invoke(msg.topic, msg.broker_name, addr, cmd)
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        rh = from_ext(ChangeInvisibleTimeResponseHeader, resp.ext_fields)
        msg.receipt_handle = attrs.evolve(
            extra,
            ck_queue_offset=offset,
            pop_time=rh.popTime,
            invisible_time=rh.invisibleTime,
            revive_qid=rh.reviveQid,
            broker_name=msg.broker_name,
            queue_offset=offset,
        ).build()


async def sleep_until_visible(receipt: str, now_ms: int) -> None:
    """Sleep until the receipt's invisible time is over (tests and demos)."""
    await aio.sleep(max(0, ExtraInfo.parse(receipt).revive_time - now_ms) / 1000)


def batch_ack_body(group: str, broker_name: str, acked: list[tuple[str, ExtraInfo, int]]) -> bytes:
    """The BATCH_ACK_MESSAGE body acknowledging ``acked`` (topic, receipt, queue offset), all
    popped from ``broker_name``: one BatchAck per checkpoint, a bit per message (upstream's
    batch ack; `SimpleConsumer.ack_batch` sends it, the gRPC proxy's loop too)."""
    cks: dict[tuple[str, str, int, int, int, int, int], list[int]] = {}
    for topic, e, offset in acked:
        key = (topic, e.retry, e.ck_queue_offset, e.queue_id, e.revive_qid, e.pop_time,
               e.invisible_time)  # fmt: skip
        cks.setdefault(key, []).append(offset - e.ck_queue_offset)
    acks = tuple(BatchAck(group, *key, tuple(sorted(bits))) for key, bits in cks.items())
    return BatchAckMessageRequestBody(broker_name, acks).to_json()


def batch_ackable(extra: ExtraInfo, offset: int) -> bool:
    """An unordered POP's message in its checkpoint's range: BATCH_ACK_MESSAGE takes it as
    ACK_MESSAGE would (ordered ones keep their one-by-one ACK, as the consumers expect)."""
    return extra.revive_qid != POP_ORDER_REVIVE_QUEUE and offset >= extra.ck_queue_offset


def ack_command(group: str, msg: ReceivedMessage) -> RemotingCommand:
    """The ACK_MESSAGE of ``msg`` for ``group`` (`SimpleConsumer.ack` sends it; the gRPC proxy
    too, from a callback or from its gRPC loop)."""
    extra = ExtraInfo.parse(msg.receipt_handle)
    header = AckMessageRequestHeader(
        consumerGroup=group,
        topic=msg.topic,
        queueId=extra.queue_id,
        extraInfo=msg.receipt_handle,
        offset=extra.queue_offset if extra.queue_offset is not None else msg.queue_offset,
    )
    return RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=to_ext(header))
