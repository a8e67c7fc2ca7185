"""Request-reply on the broker: SEND_REPLY_MESSAGE (324) / _V2 (325), upstream
ReplyMessageProcessor.

A responder sends the reply to ``<cluster>_REPLY_TOPIC`` (created at start-up with one queue,
tables/topic_config.py). The broker checks it like any send (`SendMessageProcessor.check`:
broker and topic writable, topic exists or is auto-created, queue in range), picks a queue when
the request names none, then:

1. pushes it with PUSH_REPLY_MESSAGE_TO_CLIENT (326) to the requester's connection, found in
   the producer table by the REPLY_TO_CLIENT property (the requester's client id; it is a
   producer that heartbeats to this broker). The push is a synchronous call over the client's
   own connection with upstream's 10 s Broker2Client timeout; PUSH_REPLY_TIME is added to its
   properties;
2. stores it too when ``storeReplyMessageEnable`` (default true), through the send path, so
   the reply can be pulled or looked up like any message.

The answer follows upstream: SUCCESS when the requester took the push (msgId "0", queue
offset 0, or the stored message's ids when it was stored), else SYSTEM_ERROR with upstream's
remark (no REPLY_TO_CLIENT, no connection for that client id, the push failed or timed out) --
even when the reply was stored. Each reply runs as a task of the processor's nursery (at most
``MAX_REPLIES_IN_FLIGHT``; beyond that SYSTEM_BUSY), so the responder's connection keeps being
served while the requester answers.

The decisions (whom to push to, the push request, the answer) are plain functions; the
processor only runs them and does the I/O.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from typing import Final, Protocol, assert_never

import attrs
import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.answers import BornHost
from rocketrio.actors.broker.dispatch.outcomes import PutFailed, Refusal, SendOutcome, SendStored
from rocketrio.actors.kernel.remoting import Connection, RemotingError
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import TopicConfig
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import SendMessageRequestHeader
from rocketrio.protocol.message_format import decode_properties, encode_properties
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.reply import (
    PROPERTY_MESSAGE_REPLY_TO_CLIENT,
    PROPERTY_PUSH_REPLY_TIME,
    ReplyMessageRequestHeader,
)
from rocketrio.protocol.serde import to_ext

MAX_REPLIES_IN_FLIGHT: Final = 256
PUSH_REPLY_TIMEOUT_S: Final = 10.0  # upstream Broker2Client.callClient
OnSent = Callable[[SendOutcome], None]


class ProducerChannel(Protocol):
    """A producer's connection as the clients package tracks it (ClientChannelInfo)."""

    @property
    def conn(self) -> Hashable: ...

    @property
    def client_id(self) -> str: ...


class ProducerChannels(Protocol):
    """The broker's producer table (clients/client_manager.py ProducerManager)."""

    def find_channel(self, client_id: str) -> ProducerChannel | None: ...


REPLY_KEYS: Final = frozenset({"storeReplyMessageEnable"})


class ReplySender(Protocol):
    """The send path, as the reply path uses it (send/processor.py)."""

    def check(self, h: SendMessageRequestHeader, producer: str) -> TopicConfig | Refusal: ...

    async def send(
        self,
        h: SendMessageRequestHeader,
        body: bytes,
        born_host: BornHost,
        producer: str,
        on_done: OnSent,
    ) -> Refusal | None: ...


@attrs.frozen
class ReplyConfig:
    store_reply: bool
    store_host: str  # ip:port, as the pushed reply names it

    @classmethod
    def of(cls, c: BrokerConfig) -> ReplyConfig:
        return cls(c.storeReplyMessageEnable, f"{c.brokerIP1}:{c.listenPort}")


@attrs.frozen
class ReplyAnswer:
    """What a 324/325 is answered: pushed or why not, and the reply's ids (None: no header)."""

    pushed: bool
    remark: str | None
    msg_id: str | None
    queue_id: int
    queue_offset: int


def push_target(props: dict[str, str], producers: ProducerChannels) -> ProducerChannel | str:
    """The requester's connection, or upstream's remark saying why there is none."""
    sender = props.get(PROPERTY_MESSAGE_REPLY_TO_CLIENT)
    if sender is None:
        return f"reply message properties[{PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null"
    info = producers.find_channel(sender)
    if info is None:
        return f"push reply message fail, channel of <{sender}> not found."
    return info


def push_request(
    h: SendMessageRequestHeader,
    body: bytes,
    props: dict[str, str],
    *,
    born_addr: str,
    store_host: str,
    now_ms: int,
) -> RemotingCommand:
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326) of the reply, PUSH_REPLY_TIME stamped ``now_ms``."""
    header = ReplyMessageRequestHeader(
        producerGroup=h.producerGroup,
        topic=h.topic,
        defaultTopic=h.defaultTopic,
        defaultTopicQueueNums=h.defaultTopicQueueNums,
        queueId=h.queueId,
        sysFlag=h.sysFlag,
        bornTimestamp=h.bornTimestamp,
        flag=h.flag,
        bornHost=born_addr,
        storeHost=store_host,
        storeTimestamp=now_ms,
        properties=encode_properties({**props, PROPERTY_PUSH_REPLY_TIME: str(now_ms)}),
        reconsumeTimes=h.reconsumeTimes,
        unitMode=bool(h.unitMode),
    )
    return RemotingCommand(
        code=RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, ext_fields=to_ext(header), body=body
    )


def after_push(pushed: bool, remark: str | None, queue_id: int) -> ReplyAnswer:
    """upstream handlePushReplyResult: ids zeroed so that the client can decode the answer."""
    if pushed:
        return ReplyAnswer(True, None, "0", queue_id, 0)
    return ReplyAnswer(False, remark, None, queue_id, 0)


def after_store(answer: ReplyAnswer, outcome: SendOutcome) -> ReplyAnswer:
    """upstream handlePutMessageResult: a stored reply's ids replace the zeroes; a failed put
    leaves the push's answer as it was."""
    match outcome:
        case SendStored():
            return attrs.evolve(
                answer,
                msg_id=outcome.msg_id,
                queue_id=outcome.queue_id,
                queue_offset=outcome.queue_offset,
            )
        case PutFailed():
            return answer
        case _:
            assert_never(outcome)


class ReplyMessageProcessor:
    def __init__(
        self,
        config: ReplyConfig,
        *,
        send: ReplySender,
        producers: ProducerChannels,
        now_ms: Callable[[], int],
        rng: random.Random | None = None,
        push_timeout_s: float = PUSH_REPLY_TIMEOUT_S,
    ) -> None:
        self.config = config
        self.send = send
        self.producers = producers
        self.now_ms = now_ms
        self.rng = rng or random.Random()
        self.push_timeout_s = push_timeout_s
        self.in_flight = 0
        self._nursery: trio.Nursery | None = None
        self.log = structlog.get_logger("reply")

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        if changed & REPLY_KEYS:
            self.config = ReplyConfig.of(config)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def _pick_queue(self, tc: TopicConfig, queue_id: int) -> int:
        if queue_id >= 0:
            return queue_id
        return self.rng.randrange(99_999_999) % max(1, tc.writeQueueNums)

    async def reply(
        self,
        h: SendMessageRequestHeader,
        body: bytes,
        born: BornHost,
        born_addr: str,
        on_done: Callable[[ReplyAnswer], None],
    ) -> Refusal | None:
        """Check the reply and start pushing (and storing) it: None when ``on_done`` will
        answer, else the refusal to answer now."""
        tc = self.send.check(h, born_addr)
        if isinstance(tc, Refusal):
            return tc
        if self._nursery is None:
            return Refusal(ResponseCode.SYSTEM_BUSY, "the broker is not ready to push replies")
        if self.in_flight >= MAX_REPLIES_IN_FLIGHT:
            return Refusal(
                ResponseCode.SYSTEM_BUSY,
                f"{MAX_REPLIES_IN_FLIGHT} replies are being pushed already",
            )
        h = attrs.evolve(h, queueId=self._pick_queue(tc, h.queueId))
        self.in_flight += 1
        self._nursery.start_soon(self._push_and_store, h, body, born, born_addr, on_done)
        return None

    async def _push_and_store(
        self,
        h: SendMessageRequestHeader,
        body: bytes,
        born: BornHost,
        born_addr: str,
        on_done: Callable[[ReplyAnswer], None],
    ) -> None:
        try:
            pushed, remark = await self._push(h, body, born_addr)
        finally:
            self.in_flight -= 1
        answer = after_push(pushed, remark, h.queueId)
        if not self.config.store_reply:
            on_done(answer)
            return

        def stored(outcome: SendOutcome) -> None:
            on_done(after_store(answer, outcome))

        refusal = await self.send.send(h, body, born, born_addr, stored)
        if refusal is not None:
            on_done(answer)

    async def _push(
        self, h: SendMessageRequestHeader, body: bytes, born_addr: str
    ) -> tuple[bool, str | None]:
        props = decode_properties(h.properties or "")
        target = push_target(props, self.producers)
        if isinstance(target, str):
            events.emit(self.log, events.ReplyPushFailed(topic=h.topic, reason=target))
            return False, target
        cmd = push_request(
            h,
            body,
            props,
            born_addr=born_addr,
            store_host=self.config.store_host,
            now_ms=self.now_ms(),
        )
        conn = target.conn
        assert isinstance(conn, Connection)
        failed = f"push reply message to {target.client_id}fail."  # upstream's words
        try:
            resp = await conn.request(cmd, self.push_timeout_s)
        except RemotingError as e:
            events.emit(self.log, events.ReplyPushFailed(topic=h.topic, reason=f"{failed} {e}"))
            return False, failed
        if resp.code != ResponseCode.SUCCESS:
            reason = f"{failed} {resp.remark}"
            events.emit(self.log, events.ReplyPushFailed(topic=h.topic, reason=reason))
            return False, failed
        return True, None
