"""The transaction producer (upstream TransactionMQProducer): half message, local transaction,
END_TRANSACTION, and the answers to the broker's checks.

    class Orders:
        def execute_local_transaction(self, msg, arg): ...  # -> LocalTransactionState
        def check_local_transaction(self, msg_ext): ...      # -> LocalTransactionState

    async with TransactionProducer("pg", "127.0.0.1:9876", Orders()) as p:
        result = await p.send_message_in_transaction(Message("T", b"x"), arg=order)

`send_message_in_transaction` sends the message with TRAN_MSG=true and PGROUP (sysFlag
prepared, 0x4): the broker stores it as a half message that no consumer sees. On SEND_OK it runs
``execute_local_transaction(msg, arg)``; ``msg.properties["__transactionId__"]`` is the
transaction id, the same value as ``msg_ext.msg_id`` in a later check. Then a oneway
END_TRANSACTION carries the state: COMMIT_MESSAGE makes the message visible, ROLLBACK_MESSAGE
drops it, UNKNOW leaves it to the broker's check. A send answered FLUSH_DISK_TIMEOUT,
FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE is rolled back without running the local transaction
(upstream). A listener that raises counts as UNKNOW.

Checks: the broker pushes CHECK_TRANSACTION_STATE for a half left undecided longer than its
transactionTimeOut; the client instance hands it to the producer of the message's PGROUP, which
queues it (bounded: ``check_queue_size``, upstream's 2000; a full queue drops the check, the
broker asks again next round) and answers from ``check_workers`` tasks with END_TRANSACTION
(fromTransactionCheck=true).

The listener's methods may be plain functions (they run on the Trio thread: keep them short) or
coroutine functions. `blocking.BlockingTransactionProducer` runs plain functions in worker
threads instead.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Awaitable
from typing import Any, Protocol

import attrs
import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.message import Message, SendResult, SendStatus
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from rocketrio.protocol.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    UNIQ_KEY,
    MessageDecodeError,
    MessageExt,
    decode_stored,
    parse_offset_msg_id,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, to_ext
from rocketrio.protocol.static_topic import is_logic_broker_name

log = structlog.get_logger("producer")

CHECK_QUEUE_SIZE = 2000  # upstream checkRequestHoldMax
CHECK_WORKERS = 1


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # upstream's spelling


_END_TYPE = {
    LocalTransactionState.COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: TRANSACTION_NOT_TYPE,
}
_NOT_STORED_OK = frozenset(
    {SendStatus.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT, SendStatus.SLAVE_NOT_AVAILABLE}
)

StateOrAwaitable = LocalTransactionState | Awaitable[LocalTransactionState]


class TransactionListener(Protocol):
    """Upstream TransactionListener."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> StateOrAwaitable: ...

    def check_local_transaction(self, msg: MessageExt) -> StateOrAwaitable: ...


@attrs.frozen
class TransactionSendResult(SendResult):
    """A `SendResult` with the local transaction's state (upstream TransactionSendResult)."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


@attrs.frozen
class CheckRequest:
    """One broker check waiting for the listener."""

    broker_addr: str
    msg: MessageExt
    header: CheckTransactionStateRequestHeader


def end_header(
    group: str,
    state: LocalTransactionState,
    *,
    tran_state_table_offset: int,
    commit_log_offset: int,
    msg_id: str,
    topic: str | None,
    transaction_id: str | None,
    broker_name: str | None,
    from_check: bool,
) -> EndTransactionRequestHeader:
    """The END_TRANSACTION header upstream's DefaultMQProducerImpl builds."""
    return EndTransactionRequestHeader(
        producerGroup=group,
        tranStateTableOffset=tran_state_table_offset,
        commitLogOffset=commit_log_offset,
        commitOrRollback=_END_TYPE[state],
        msgId=msg_id,
        topic=topic,
        fromTransactionCheck=from_check,
        transactionId=transaction_id,
        bname=broker_name,
    )


async def _state_of(value: StateOrAwaitable | None) -> LocalTransactionState:
    if inspect.isawaitable(value):
        value = await value
    return value if isinstance(value, LocalTransactionState) else LocalTransactionState.UNKNOW


class TransactionProducer:
    """Keyword arguments other than the check settings go to `Producer`."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str],
        listener: TransactionListener,
        *,
        check_queue_size: int = CHECK_QUEUE_SIZE,
        check_workers: int = CHECK_WORKERS,
        **producer_kwargs: Any,
    ) -> None:
        self.producer = Producer(group, namesrv_addr, **producer_kwargs)
        self.group = self.producer.group
        self.listener = listener
        self.check_workers = check_workers
        self._check_send, self._check_recv = aio.create_memory_object_stream[CheckRequest](
            check_queue_size
        )
        self._nursery_cm: Any = None
        self.checks_answered = 0

    async def __aenter__(self) -> TransactionProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.shutdown()

    async def start(self) -> None:
        await self.producer.start()
        try:
            self._nursery_cm = aio.create_task_group()
            nursery = await self._nursery_cm.__aenter__()
            for _ in range(self.check_workers):
                nursery.start_soon(self._check_worker, self._check_recv.clone())
            self.producer.client.transaction_checkers[self.group] = self.on_check
        except BaseException:
            await self.producer.shutdown()
            raise

    async def shutdown(self) -> None:
        self.producer.client.transaction_checkers.pop(self.group, None)
        try:
            if self._nursery_cm is not None:
                cm, self._nursery_cm = self._nursery_cm, None
                await self._check_send.aclose()
                await cm.__aexit__(None, None, None)
        finally:
            await self.producer.shutdown()

    # -- the transaction
    async def send_message_in_transaction(
        self, msg: Message, arg: Any = None, *, timeout: float | None = None
    ) -> TransactionSendResult:
        props = dict(msg.properties or {})
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        props[PROPERTY_PRODUCER_GROUP] = self.group
        half = attrs.evolve(msg, properties=props, delay_time_level=0)  # upstream: no delay
        try:
            sent = await self.producer.send(half, timeout=timeout)
        except (MQClientError, MQBrokerError, RemotingError) as e:
            raise MQClientError(f"send message Exception: {e}") from e
        state = LocalTransactionState.UNKNOW
        remark: str | None = None
        if sent.send_status is SendStatus.SEND_OK:
            if sent.transaction_id is not None:
                props[PROPERTY_TRANSACTION_ID] = sent.transaction_id
            local = attrs.evolve(half, properties=props)
            try:
                state = await _state_of(self.listener.execute_local_transaction(local, arg))
            except Exception as e:
                remark = f"executeLocalTransactionBranch exception: {e!r}"
                events.emit(
                    log,
                    events.TransactionListenerFailed(
                        group=self.group, msg_id=sent.msg_id, phase="execute", error=repr(e)
                    ),
                )
        elif sent.send_status in _NOT_STORED_OK:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        await self._end_transaction(msg, sent, state, remark)
        return TransactionSendResult(
            send_status=sent.send_status,
            msg_id=sent.msg_id,
            offset_msg_id=sent.offset_msg_id,
            message_queue=sent.message_queue,
            queue_offset=sent.queue_offset,
            transaction_id=sent.transaction_id,
            local_transaction_state=state,
        )

    async def _end_transaction(
        self, msg: Message, sent: SendResult, state: LocalTransactionState, remark: str | None
    ) -> None:
        broker = self.producer.client.broker_name_of(sent.message_queue)
        addr = self.producer.client.find_master_addr(broker)
        if is_logic_broker_name(sent.message_queue.brokerName):
            # a static topic's half is on the broker that stored it, which a remapping may
            # have made a former leader: its address is in the offset message id
            ip, port, _ = parse_offset_msg_id(sent.offset_msg_id)
            addr = f"{ip}:{port}"
        header = end_header(
            self.group,
            state,
            tran_state_table_offset=sent.queue_offset,
            commit_log_offset=parse_offset_msg_id(sent.offset_msg_id)[2],
            msg_id=sent.msg_id,
            topic=msg.topic,
            transaction_id=sent.transaction_id,
            broker_name=broker,
            from_check=False,
        )
        if addr is None:
            events.emit(
                log,
                events.TransactionEndFailed(
                    group=self.group, msg_id=sent.msg_id, error=f"no master of {broker}"
                ),
            )
            return
        await self._end_oneway(addr, header, remark)

    async def _end_oneway(
        self, addr: str, header: EndTransactionRequestHeader, remark: str | None
    ) -> None:
        cmd = RemotingCommand(
            code=RequestCode.END_TRANSACTION, ext_fields=to_ext(header), remark=remark
        )
        try:
            await self.producer.client.remoting.invoke_oneway(addr, cmd)
        except (RemotingError, OSError) as e:
            events.emit(
                log,
                events.TransactionEndFailed(group=self.group, msg_id=header.msgId, error=str(e)),
            )

    # -- checks
    def on_check(self, broker_addr: str, cmd: RemotingCommand) -> bool:
        """A CHECK_TRANSACTION_STATE for this client: True when it is this producer's group."""
        try:
            msg = decode_stored(cmd.body)[0]
            header = from_ext(CheckTransactionStateRequestHeader, cmd.ext_fields)
        except (MessageDecodeError, HeaderError):
            return False
        if msg.properties.get(PROPERTY_PRODUCER_GROUP) != self.group:
            return False
        try:
            self._check_send.send_nowait(CheckRequest(broker_addr, msg, header))
        except (aio.WouldBlock, aio.ClosedResourceError):
            events.emit(log, events.TransactionCheckDropped(group=self.group, msg_id=msg.msg_id))
        return True

    async def _check_worker(self, recv: aio.MemoryObjectReceiveStream[CheckRequest]) -> None:
        async with recv:
            async for req in recv:
                await self._answer_check(req)

    async def _answer_check(self, req: CheckRequest) -> None:
        msg, h = req.msg, req.header
        uniq = msg.properties.get(UNIQ_KEY) or msg.offset_msg_id
        remark: str | None = None
        try:
            state = await _state_of(self.listener.check_local_transaction(msg))
        except Exception as e:
            state = LocalTransactionState.UNKNOW
            remark = f"checkLocalTransactionState Exception: {e!r}"
            events.emit(
                log,
                events.TransactionListenerFailed(
                    group=self.group, msg_id=uniq, phase="check", error=repr(e)
                ),
            )
        header = end_header(
            self.group,
            state,
            tran_state_table_offset=h.tranStateTableOffset,
            commit_log_offset=h.commitLogOffset,
            msg_id=uniq,
            topic=h.topic,
            transaction_id=h.transactionId,
            broker_name=h.bname,
            from_check=True,
        )
        await self._end_oneway(req.broker_addr, header, remark)
        self.checks_answered += 1
