"""`rocketrio admin` message commands, named and flagged as mqadmin's (tools/command/message).

- ``queryMsgById -i id[,id] [-t topic] [-f charset]``: by offset message id (or UNIQ_KEY with -t);
- ``queryMsgByUniqueKey -i id -t topic [-a]``: by the client's message id (UNIQ_KEY); with
  ``-g group -d clientId``, that push consumer client consumes the message directly instead
  (CONSUME_MESSAGE_DIRECTLY through the broker that stored it) and its
  ConsumeMessageDirectlyResult is printed, as mqadmin prints it;
- ``queryMsgByOffset -t topic -b brokerName -i queueId -o offset [-f charset]``: a pull of one;

each printed as mqadmin prints a message (Topic, Tags, Keys, Queue ID, ... Properties, the
body; plus a Transaction line for a half message or a committed one) followed by its
MessageTrack: for every group consuming the topic whether it consumed the message (CONSUMED,
NOT_CONSUME_YET, NOT_ONLINE, PULL, ...).

- ``printMsg -t topic [-c charset] [-s subExpression] [-b begin] [-e end] [-d true|false]``:
  every queue of the topic from the begin offset (searched by time) to the end;
- ``consumeMessage -t topic [-b brokerName [-i queueId [-o offset]]] [-g group] [-s begin]
  [-e end] [-c count]``: pull-consume up to ``count`` (128) messages and print them;
- ``sendMessage -t topic -p body [-k keys] [-c tags] [-b brokerName [-i queueId]]``: one send,
  printed as mqadmin's #Broker Name / #QID / #Send Result / #MsgId line.

Timestamps are epoch milliseconds or ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time (mqadmin's
forms). Bodies are printed as text in the charset asked for (UTF-8) with control characters
escaped; a body that is not text in that charset is printed as base64, never raw. ``--json``
gives the same values with epoch-ms times. Not provided: printMsg's ``-l`` (light message queues
do not exist here).
"""

from __future__ import annotations

import argparse
import base64
import codecs
import datetime as dt
from typing import Any

import attrs

from rocketrio.actors.client.admin import CONSUMER_CALL_TIMEOUT_S
from rocketrio.actors.client.api import PullStatus
from rocketrio.actors.client.errors import MQClientError, NotFound, UsageError
from rocketrio.actors.client.message_admin import PULL_BATCH, MessageAdmin, QueueTarget
from rocketrio.actors.client.message_track import MessageTrack
from rocketrio.cli.admin import command, table
from rocketrio.cli.dates import format_ms
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.consume_directly import (
    ConsumeMessageDirectlyResult,
    ConsumeMessageDirectlyResultRequestHeader,
)
from rocketrio.protocol.message import MessageExt
from rocketrio.protocol.serde import from_json

DEFAULT_CHARSET = "UTF-8"
CONSUME_COUNT = 128  # consumeMessage's default messageNumber (upstream)
BODY_SHOWN_MAX = 4096  # characters of a body printed in a human view
TOOLS_PRODUCER_GROUP = "TOOLS_PRODUCER"  # the producer group sendMessage sends as


# --- values --------------------------------------------------------------------------------


def parse_timestamp(value: str) -> int:
    """mqadmin's timestamp forms: epoch milliseconds, or ``yyyy-MM-dd#HH:mm:ss:SSS`` local."""
    value = value.strip()
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        when = dt.datetime.strptime(value, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise UsageError(
            f"timestamp {value!r} is neither epoch milliseconds nor yyyy-MM-dd#HH:mm:ss:SSS"
        ) from None
    return int(when.astimezone().timestamp() * 1000)


def check_charset(name: str) -> str:
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise UsageError(f"unknown charset {name}") from None


def escape_controls(text: str) -> str:
    """``text`` with every non-printable character escaped, so it stays on its line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


@attrs.frozen
class MessageView:
    """A message as the commands show it: mqadmin's fields, the body as text in the charset
    asked for or, when it is not text in that charset, as base64 (``bodyBase64``)."""

    msgId: str
    offsetMsgId: str
    topic: str
    tags: str | None
    keys: str | None
    queueId: int
    queueOffset: int
    commitLogOffset: int
    reconsumeTimes: int
    bornTimestamp: int
    storeTimestamp: int
    bornHost: str
    storeHost: str
    sysFlag: int
    properties: dict[str, str]
    bodySize: int
    body: str | None = None
    bodyBase64: str | None = None

    @classmethod
    def of(
        cls, m: MessageExt, charset: str = DEFAULT_CHARSET, with_body: bool = True
    ) -> MessageView:
        text = b64 = None
        if with_body:
            try:
                text = m.body.decode(charset)
            except UnicodeDecodeError:
                b64 = base64.b64encode(m.body).decode()
        return cls(
            m.msg_id, m.offset_msg_id, m.topic, m.tags, " ".join(m.keys) or None, m.queue_id,
            m.queue_offset, m.commitlog_offset, m.reconsume_times, m.born_timestamp,
            m.store_timestamp, m.born_host, m.store_host, m.sys_flag, dict(m.properties),
            len(m.body), text, b64,
        )  # fmt: skip

    def body_line(self) -> str:
        if self.body is not None:
            shown = escape_controls(self.body[:BODY_SHOWN_MAX])
            return shown + (f"... ({len(self.body)} characters)" if len(self.body) > 4096 else "")
        if self.bodyBase64 is not None:
            return f"({self.bodySize} bytes, not text) base64:{self.bodyBase64}"
        return "NOT PRINT BODY"


@attrs.frozen
class ShownMessage:
    """A found message and, per consumer group of its topic, whether it was consumed."""

    message: MessageView
    tracks: list[MessageTrack]


def transaction_state(sys_flag: int, props: dict[str, str]) -> str | None:
    """What the message is in a transaction, for the text form: a half message (TRAN_MSG;
    also one discarded to TRANS_CHECK_MAX_TIME_TOPIC) is PREPARED, naming its producer group,
    real topic and queue and how often it was checked; a committed one COMMITTED."""
    if props.get("TRAN_MSG") == "true":
        checks = props.get("TRANSACTION_CHECK_TIMES", "0")
        return (
            f"PREPARED (PGROUP={props.get('PGROUP', '')}, REAL_TOPIC={props.get('REAL_TOPIC', '')}"
            f", REAL_QID={props.get('REAL_QID', '')}, TRANSACTION_CHECK_TIMES={checks})"
        )
    if sys_flag & 0xC == 0x8:
        return "COMMITTED"
    return None


def _kv(label: str, value: Any) -> None:
    print(f"{label:<20} {value}")


def print_shown(shown: list[ShownMessage], a: argparse.Namespace) -> None:
    for i, s in enumerate(shown):
        m = s.message
        if i:
            print()
        _kv("OffsetID:", m.offsetMsgId)
        _kv("MsgId:", m.msgId)
        _kv("Topic:", m.topic)
        _kv("Tags:", f"[{m.tags or ''}]")
        _kv("Keys:", f"[{m.keys or ''}]")
        _kv("Queue ID:", m.queueId)
        _kv("Queue Offset:", m.queueOffset)
        _kv("CommitLog Offset:", m.commitLogOffset)
        _kv("Reconsume Times:", m.reconsumeTimes)
        _kv("Born Timestamp:", format_ms(m.bornTimestamp))
        _kv("Store Timestamp:", format_ms(m.storeTimestamp))
        _kv("Born Host:", m.bornHost)
        _kv("Store Host:", m.storeHost)
        _kv("System Flag:", m.sysFlag)
        tx = transaction_state(m.sysFlag, m.properties)
        if tx is not None:
            _kv("Transaction:", tx)
        props = ", ".join(f"{k}={escape_controls(v)}" for k, v in sorted(m.properties.items()))
        _kv("Properties:", "{" + props + "}")
        _print_waiting(m)
        _kv("Message Body:", m.body_line())
        print()
        if not s.tracks:
            print("WARN: No Consumer")
            continue
        rows = [[t.consumerGroup, t.trackType.value, t.exceptionDesc or ""] for t in s.tracks]
        print(table(["#Consumer Group", "#Track Type", "#Detail"], rows))


def _print_waiting(m: MessageView) -> None:
    """A delay-level or timer message still waiting: where it goes and when (timers) or at
    which level (the level's delay is the broker's messageDelayLevel)."""
    real = m.properties.get("REAL_TOPIC")
    if m.topic not in ("SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer") or real is None:
        return
    _kv("Waiting For:", f"{real} queue {m.properties.get('REAL_QID', '0')}")
    out = m.properties.get("TIMER_OUT_MS", "")
    if out.isdigit():
        _kv("Deliver Time:", format_ms(int(out)))
    elif "DELAY" in m.properties:
        _kv("Delay Level:", m.properties["DELAY"])


async def _shown(
    ma: MessageAdmin, msgs: list[MessageExt], charset: str, where: tuple[str, str] | None = None
) -> list[ShownMessage]:
    return [ShownMessage(MessageView.of(m, charset), await ma.track(m, where)) for m in msgs]


# --- queries -------------------------------------------------------------------------------


def _by_id_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="id, or id1,id2,...")
    p.add_argument("-t", "--topic", help="needed to look an id up as UNIQ_KEY")
    p.add_argument("-f", "--bodyFormat", dest="charset", default=DEFAULT_CHARSET)


@command("queryMsgById", "show messages by offset message id (or UNIQ_KEY with -t)", print_shown)(
    _by_id_args
)
async def query_msg_by_id(admin: Any, a: argparse.Namespace) -> list[ShownMessage]:
    charset = check_charset(a.charset)
    ids = [i.strip() for i in a.msg_id.split(",") if i.strip()]
    msgs = [await admin.query_msg_by_id(i, a.topic) for i in ids]
    return await _shown(MessageAdmin(admin), msgs, charset)


def _by_unique_key_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="the client's message id")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-a", "--showAll", dest="show_all", action="store_true", help="every copy")
    p.add_argument("-g", "--consumerGroup", dest="group", help="with -d: consume it directly")
    p.add_argument("-d", "--clientId", dest="client_id", help="the push consumer's client id")


def print_shown_or_direct(
    result: list[ShownMessage] | ConsumeMessageDirectlyResult, a: argparse.Namespace
) -> None:
    if isinstance(result, ConsumeMessageDirectlyResult):
        print(result)  # mqadmin prints the result's toString
    else:
        print_shown(result, a)


async def consume_directly(
    admin: Any, ma: MessageAdmin, a: argparse.Namespace
) -> ConsumeMessageDirectlyResult:
    """upstream QueryMsgByUniqueKeySubCommand with -g and -d: a push consumer only, asked
    through the broker that stored the message, by the message's offset id."""
    group, client_id = a.group.strip(), a.client_id.strip()
    try:
        info = await admin.consumer_running_info(group, client_id)
    except MQClientError as e:
        raise NotFound(f"get consumer runtime info for {client_id} client failed: {e}") from None
    if not info.is_push():
        raise UsageError(f"client {client_id} is not a push consumer: no direct consumption")
    found = await ma.by_unique_key(a.topic, a.msg_id.strip())
    if not found:
        raise NotFound(f"no message with unique key {a.msg_id} in topic {a.topic}")
    msg = found[0]
    header = ConsumeMessageDirectlyResultRequestHeader(
        consumerGroup=group, clientId=client_id, msgId=msg.offset_msg_id, topic=a.topic
    )
    resp = await admin.api.call(
        msg.store_host,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        header,
        timeout_s=CONSUMER_CALL_TIMEOUT_S,
    )
    return from_json(ConsumeMessageDirectlyResult, resp.body)


@command(
    "queryMsgByUniqueKey",
    "show a message by its client id (UNIQ_KEY), or have a consumer consume it (-g, -d)",
    print_shown_or_direct,
)(_by_unique_key_args)
async def query_msg_by_unique_key(
    admin: Any, a: argparse.Namespace
) -> list[ShownMessage] | ConsumeMessageDirectlyResult:
    ma = MessageAdmin(admin)
    if a.group and a.client_id:
        return await consume_directly(admin, ma, a)
    found = await ma.by_unique_key(a.topic, a.msg_id.strip())
    if not found:
        raise NotFound(f"no message with unique key {a.msg_id} in topic {a.topic}")
    return await _shown(ma, found if a.show_all else found[:1], DEFAULT_CHARSET)


def _by_offset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True)
    p.add_argument("-i", "--queueId", dest="queue_id", type=int, required=True)
    p.add_argument("-o", "--offset", type=int, required=True, help="queue offset")
    p.add_argument("-f", "--bodyFormat", dest="charset", default=DEFAULT_CHARSET)


@command("queryMsgByOffset", "show the message at a queue offset", print_shown)(_by_offset_args)
async def query_msg_by_offset(admin: Any, a: argparse.Namespace) -> list[ShownMessage]:
    charset = check_charset(a.charset)
    ma = MessageAdmin(admin)
    q = await ma.queue(a.topic, a.broker_name, a.queue_id)
    msg = await ma.message_at(q, a.offset)
    return await _shown(ma, [msg], charset, (q.mq.brokerName, q.addr))


# --- reading queues ------------------------------------------------------------------------


@attrs.frozen
class QueueRead:
    """What one queue gave between two offsets: the messages, and how the read ended."""

    queue: MessageQueue
    minOffset: int
    maxOffset: int
    messages: list[MessageView]
    notes: list[str]


def _mq_text(mq: MessageQueue) -> str:
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.brokerName}, queueId={mq.queueId}]"


def print_reads(reads: list[QueueRead], a: argparse.Namespace) -> None:
    for r in reads:
        print(f"minOffset={r.minOffset}, maxOffset={r.maxOffset}, {_mq_text(r.queue)}")
        for m in r.messages:
            print(
                f"MSGID: {m.msgId} queueOffset={m.queueOffset} tags={m.tags or ''} "
                f"keys={m.keys or ''} storeTimestamp={format_ms(m.storeTimestamp)} "
                f"bornHost={m.bornHost} BODY: {m.body_line()}"
            )
        for note in r.notes:
            print(note)
        print("-" * 56)
    print(f"{sum(len(r.messages) for r in reads)} message(s)")


async def read_queue(
    ma: MessageAdmin,
    q: QueueTarget,
    low: int,
    high: int,
    *,
    expression: str = "*",
    group: str | None = None,
    charset: str = DEFAULT_CHARSET,
    with_body: bool = True,
) -> QueueRead:
    """Messages of offsets ``low`` up to (not including) ``high``, pulled in batches as
    upstream's printMsg does; each pull moves on to the broker's next begin offset."""
    msgs: list[MessageView] = []
    notes: list[str] = []
    offset = low
    kw = {"group": group} if group else {}
    while offset < high:
        batch = min(PULL_BATCH, high - offset)
        result = await ma.pull(q, offset, batch, expression=expression, **kw)
        match result.status:
            case PullStatus.FOUND:
                msgs.extend(
                    MessageView.of(m, charset, with_body)
                    for m in result.messages()
                    if low <= m.queue_offset < high
                )
            case PullStatus.NO_MATCHED_MSG:
                notes.append(f"no matched msg from offset {offset} to {result.next_begin_offset}")
            case PullStatus.NO_NEW_MSG | PullStatus.OFFSET_ILLEGAL:
                notes.append(
                    f"print msg finished. status={result.status.value}, "
                    f"offset={result.next_begin_offset}"
                )
                break
        if result.next_begin_offset <= offset:  # the broker gave no way forward
            notes.append(f"stopped at offset {offset}: the broker does not move past it")
            break
        offset = result.next_begin_offset
    return QueueRead(q.mq, low, high, msgs, notes)


def _print_msg_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-c", "--charsetName", dest="charset", default=DEFAULT_CHARSET)
    p.add_argument("-s", "--subExpression", dest="expression", default="*", help='"TagA || TagB"')
    p.add_argument("-b", "--beginTimestamp", dest="begin", help="ms or yyyy-MM-dd#HH:mm:ss:SSS")
    p.add_argument("-e", "--endTimestamp", dest="end", help="ms or yyyy-MM-dd#HH:mm:ss:SSS")
    p.add_argument("-d", "--printBody", dest="print_body", default="true", help="true | false")


@command("printMsg", "print the messages of every queue of a topic", print_reads)(_print_msg_args)
async def print_msg(admin: Any, a: argparse.Namespace) -> list[QueueRead]:
    charset = check_charset(a.charset)
    begin = parse_timestamp(a.begin) if a.begin else None
    end = parse_timestamp(a.end) if a.end else None
    with_body = a.print_body.strip().lower() == "true"
    ma = MessageAdmin(admin)
    reads = []
    for q in await ma.queues(a.topic):
        low, high = await ma.offset_range(q)
        if begin is not None:
            low = await ma.search_offset(q, begin)
        if end is not None:
            high = await ma.search_offset(q, end)
        reads.append(
            await read_queue(
                ma, q, low, high, expression=a.expression, charset=charset, with_body=with_body
            )
        )
    return reads


def _consume_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--brokerName", dest="broker_name")
    p.add_argument("-i", "--queueId", dest="queue_id", type=int)
    p.add_argument("-o", "--offset", type=int, help="queue offset to start from")
    p.add_argument("-g", "--consumerGroup", dest="group", help="pull as this group")
    p.add_argument("-s", "--beginTimestamp", dest="begin", help="ms or yyyy-MM-dd#HH:mm:ss:SSS")
    p.add_argument("-e", "--endTimestamp", dest="end", help="ms or yyyy-MM-dd#HH:mm:ss:SSS")
    p.add_argument("-c", "--MessageNumber", dest="count", type=int, default=CONSUME_COUNT)


@command("consumeMessage", "pull-consume messages of a topic or queue and print them", print_reads)(
    _consume_args
)
async def consume_message(admin: Any, a: argparse.Namespace) -> list[QueueRead]:
    if a.count <= 0:
        raise UsageError("give a positive messageNumber (-c)")
    if a.queue_id is not None and a.broker_name is None:
        raise UsageError("set the brokerName (-b) with the queueId (-i)")
    if a.offset is not None and a.queue_id is None:
        raise UsageError("set the queueId (-i) with the offset (-o)")
    begin = parse_timestamp(a.begin) if a.begin else None
    end = parse_timestamp(a.end) if a.end else None
    if begin is not None and end is not None and begin > end:
        raise UsageError("the beginTimestamp (-s) is after the endTimestamp (-e)")
    ma = MessageAdmin(admin)
    if a.queue_id is not None:
        targets = [await ma.queue(a.topic, a.broker_name, a.queue_id)]
    else:
        targets = await ma.queues(a.topic)
        if a.broker_name is not None:
            targets = [q for q in targets if q.mq.brokerName == a.broker_name]
            if not targets:
                await ma.queue(a.topic, a.broker_name, 0)  # raises NotFound naming the brokers
    left = a.count
    reads = []
    for q in targets:
        if left <= 0:
            break
        low, high = await ma.offset_range(q)
        if begin is not None:
            low = await ma.search_offset(q, begin)
        if end is not None:
            high = await ma.search_offset(q, end)
        if a.offset is not None:
            if a.offset >= high:
                raise NotFound(
                    f"offset {a.offset} is beyond the last message of {_mq_text(q.mq)} "
                    f"(max offset {high})"
                )
            low = max(low, a.offset)
        high = min(high, low + left)
        read = await read_queue(ma, q, low, high, group=a.group)
        left -= len(read.messages)
        reads.append(read)
    return reads


# --- sending -------------------------------------------------------------------------------


@attrs.frozen
class SendView:
    """sendMessage's result line (upstream prints the first four)."""

    brokerName: str
    queueId: int
    sendStatus: str
    msgId: str
    offsetMsgId: str
    queueOffset: int


def print_send(r: SendView, a: argparse.Namespace) -> None:
    fmt = "{:<32}  {:<4}  {:<20}    {}"
    print(fmt.format("#Broker Name", "#QID", "#Send Result", "#MsgId"))
    print(fmt.format(r.brokerName, r.queueId, r.sendStatus, r.msgId))


def _send_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-p", "--body", required=True, help="the body, sent as UTF-8")
    p.add_argument("-k", "--key", dest="keys", help="message keys")
    p.add_argument("-c", "--tags")
    p.add_argument("-b", "--broker", dest="broker_name", help="send to this broker name")
    p.add_argument("-i", "--qid", dest="queue_id", type=int, help="send to this queue (with -b)")


@command("sendMessage", "send one message and print the send result", print_send)(_send_args)
async def send_message(admin: Any, a: argparse.Namespace) -> SendView:
    from rocketrio.actors.client.config import ClientConfig
    from rocketrio.actors.client.message import Message
    from rocketrio.actors.client.producer import Producer

    if a.queue_id is not None and a.broker_name is None:
        raise UsageError("set the broker name (-b) when the queue (-i) is chosen")
    ma = MessageAdmin(admin)
    await admin.topic_route(a.topic)  # an unknown topic is refused, not auto-created
    target = None
    if a.broker_name is not None:  # -b alone: queue 0 of that broker
        qid = a.queue_id if a.queue_id is not None else 0
        target = await ma.queue(a.topic, a.broker_name, qid, write=True)
    msg = Message(a.topic, a.body.encode(), tags=a.tags or None, keys=a.keys or None)
    config = ClientConfig(
        namesrvAddr=";".join(admin.namesrv_addrs),
        accessKey=a.access_key or "",
        secretKey=a.secret_key or "",
    )
    async with Producer(
        TOOLS_PRODUCER_GROUP,
        admin.namesrv_addrs,
        transport=admin.remoting.transport,
        client_config=config,
        retries=0 if target is not None else 2,
    ) as producer:
        if target is not None:
            result = await producer.send_to_queue(msg, target.mq)
        else:
            result = await producer.send(msg)
    mq = result.message_queue
    return SendView(
        mq.brokerName, mq.queueId, result.send_status.value, result.msg_id,
        result.offset_msg_id, result.queue_offset,
    )  # fmt: skip
