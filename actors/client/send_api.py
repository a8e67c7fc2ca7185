"""A send on the wire (upstream MQClientAPIImpl.sendMessage and Validators): the checks a
message passes before it leaves, the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request, the
`SendResult` of an answer, which failures another broker may not have (`retryable`, upstream
retryResponseCodes), and how a batch is cut into requests of at most maxMessageSize.

The producer (producer.py) decides where and how often to send; nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rocketrio.actors.client.config import ProducerConfig
from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.message import Message, SendResult, SendStatus
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import SendMessageRequestHeaderV2, SendMessageResponseHeader
from rocketrio.protocol.message import PROPERTY_TRANSACTION_PREPARED, TRANSACTION_PREPARED_TYPE
from rocketrio.protocol.message_format import PROPERTY_MESSAGE_TYPE
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.reply import REPLY_MESSAGE_FLAG
from rocketrio.protocol.serde import from_ext, to_ext

# a transactional half message (TRAN_MSG=true) is sent with sysFlag prepared, like upstream
_PREPARED_MARK = f"{PROPERTY_TRANSACTION_PREPARED}\x01true"
_REPLY_MARK = f"{PROPERTY_MESSAGE_TYPE}\x01{REPLY_MESSAGE_FLAG}"


def is_reply_props(props: str) -> bool:
    """MSG_TYPE=reply among encoded ``k\x01v\x02`` properties."""
    return any(p == _REPLY_MARK for p in props.split("\x02")) if _REPLY_MARK in props else False


_SEND_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
# upstream DefaultMQProducer.retryResponseCodes: another broker may accept the message
RETRY_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
        # static topics: the logic queue moved (remapping); the retry takes a fresh route.
        # Upstream does not retry it: a send during a remapping failed there.
        ResponseCode.NOT_LEADER_FOR_QUEUE,
    }
)
_TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 127


def retryable(exc: Exception) -> bool:
    """No answer, or an answer another broker may not give (upstream retryResponseCodes)."""
    if isinstance(exc, MQBrokerError):
        return exc.code in RETRY_RESPONSE_CODES
    return isinstance(exc, RemotingError)


def check_topic(topic: str) -> None:
    """Upstream Validators.checkTopic."""
    if not topic or not topic.strip():
        raise MQClientError("the topic is empty")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MQClientError(f"the topic is longer than {TOPIC_MAX_LENGTH} characters: {topic}")
    if not _TOPIC_RE.match(topic):
        raise MQClientError(f"the topic {topic!r} contains characters other than [%|a-zA-Z0-9_-]")


def check_message(msg: Message, max_size: int) -> None:
    """Upstream Validators.checkMessage."""
    check_topic(msg.topic)
    if not msg.body:
        raise MQClientError("the message body is empty")
    if len(msg.body) > max_size:
        raise MQClientError(f"the message body is {len(msg.body)} bytes, above {max_size}")


def batch_chunks(sizes: Sequence[int], limit: int) -> list[tuple[int, int]]:
    """Split encoded batch records into [lo, hi) runs of at most ``limit`` bytes each (a
    record larger than the limit travels alone and the broker judges it)."""
    chunks: list[tuple[int, int]] = []
    lo, total = 0, 0
    for i, size in enumerate(sizes):
        if i > lo and total + size > limit:
            chunks.append((lo, i))
            lo, total = i, 0
        total += size
    if lo < len(sizes):
        chunks.append((lo, len(sizes)))
    return chunks


def send_request(
    group: str,
    config: ProducerConfig,
    mq: MessageQueue,
    flag: int,
    props: str,
    body: bytes,
    *,
    batch: bool,
) -> RemotingCommand:
    """SEND_MESSAGE_V2 (310) or SEND_BATCH_MESSAGE (320) of ``body`` to ``mq``, stamped now."""
    header = SendMessageRequestHeaderV2(
        a=group,
        b=mq.topic,
        c=config.createTopicKey,
        d=config.defaultTopicQueueNums,
        e=mq.queueId,
        f=TRANSACTION_PREPARED_TYPE if _PREPARED_MARK in props else 0,
        g=wallclock_ms(),
        h=flag,
        i=props,
        j=0,
        k=False,
        m=batch,
        n=mq.brokerName,
    )
    if batch:
        code = RequestCode.SEND_BATCH_MESSAGE
    elif is_reply_props(props):  # a reply (request_reply.py) goes as upstream sends it
        code = RequestCode.SEND_REPLY_MESSAGE_V2
    else:
        code = RequestCode.SEND_MESSAGE_V2
    return RemotingCommand(code=code, ext_fields=to_ext(header), body=body)


def parse_send_result(resp: RemotingCommand, mq: MessageQueue, uniq: str, addr: str) -> SendResult:
    """The SendResult of a broker's answer, or `MQBrokerError` for an answer that is not one."""
    status = _SEND_STATUS.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise MQBrokerError(resp.code, resp.remark, addr)
    h = from_ext(SendMessageResponseHeader, resp.ext_fields)
    return SendResult(
        send_status=status,
        msg_id=uniq,
        offset_msg_id=h.msgId,
        message_queue=MessageQueue(mq.topic, mq.brokerName, h.queueId),
        queue_offset=h.queueOffset,
        transaction_id=h.transactionId,
    )
