"""AckMessage of one entry without a Trio task: what the official SDK sends for every message
it consumes (one AckMessage per message, one at a time), so the proxy's CPU per consumed
message is mostly this call's.

`AckNowait.ack_nowait` runs in the Trio thread the moment the call crosses from grpcio
(`GrpcBridge.fast`, through `ProxyService.start_nowait`). When the handle decodes, no auto
renewal of it is under way (`AutoRenewer.release_nowait`) and its broker set's master is cached
with an open connection, it writes the ACK_MESSAGE with ``Connection.request_nowait`` and
answers the call from the response callback; the answer is the one the task path
(``ProxyService.ack_message``) gives: the entry's status from the broker's code, a lost or late
broker INTERNAL_SERVER_ERROR. Anything else (several entries: one BATCH_ACK_MESSAGE on the
task path; a bad handle; a renewal in progress; no master known) takes the task path, with
nothing done here. The deadline is the consumer's 3 s, kept by the shared `CallbackRequests`.
One difference: the task path gives an ack up as soon as the route names a new master of a
hung broker set (`invoke_watched`); here it waits its deadline (3 s at most, then
INTERNAL_SERVER_ERROR, as when the ack is refused after a move).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import trio

from rocketrio.actors.client.async_send import CallbackRequests
from rocketrio.actors.client.backend import Reply
from rocketrio.actors.client.errors import MQBrokerError
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.simple_consumer import ReceivedMessage, SimpleConsumer, ack_command
from rocketrio.actors.proxy import mapping as mp
from rocketrio.actors.proxy.grpc_bridge import Call
from rocketrio.actors.proxy.mapping import BadRequest, Code, status
from rocketrio.actors.proxy.receipt import Receipt, decode_receipt
from rocketrio.actors.proxy.renew import AutoRenewer
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.remoting import RemotingCommand

ErrorAnswer = Callable[[str, BaseException], Any]


class AckNowait:
    def __init__(
        self,
        client: MQClientInstance,
        renewer: AutoRenewer,
        consumer_of: Callable[[str], SimpleConsumer],
        received_of: Callable[[str, str], ReceivedMessage],
        requests: CallbackRequests,
    ) -> None:
        self.client = client
        self.renewer = renewer
        self.consumer_of = consumer_of
        self.received_of = received_of
        self.requests = requests
        self.max_in_flight = 1024
        self.timeout_s = 3.0  # the SimpleConsumer's request timeout

    def ack_nowait(self, call: Call, error_answer: ErrorAnswer) -> bool:
        """Start ``call`` (an AckMessage) without a task when it can be; False: nothing was
        done, the call takes the task path. Never raises: a failure is the call's answer."""
        req: spb.AckMessageRequest = call.request
        if len(req.entries) != 1 or not req.group.name or len(self.requests) >= self.max_in_flight:
            return False
        entry = req.entries[0]
        try:
            broker_name = decode_receipt(entry.receipt_handle).extra.broker_name
        except BadRequest:
            return False  # the task path answers the entry's own status
        addr = self.client.find_master_addr(broker_name)
        conn = self.client.remoting.connection_nowait(addr) if addr else None
        if addr is None or conn is None:
            return False
        consumer = self.consumer_of(req.group.name)
        handle = self.renewer.release_nowait(consumer.group, entry.receipt_handle)
        if handle is None:
            return False
        try:
            cmd = ack_command(consumer.group, self.received_of(req.topic.name, handle))
            self.client.remoting.before_request(addr, cmd)
        except Exception as e:
            call.respond(error_answer(call.method, e))
            return True

        def done(reply: Reply[RemotingCommand]) -> None:
            try:
                call.respond(ack_answer(entry, reply.result(), addr))
            except Exception as e:
                call.respond(error_answer(call.method, e))

        self.requests.start(conn, cmd, trio.current_time() + self.timeout_s, done)
        return True


def ack_status(resp: RemotingCommand, addr: str) -> Any:
    """An entry's status from the broker's response to its ACK_MESSAGE (or BATCH_ACK_MESSAGE)
    at ``addr``: what ``ProxyService.ack_message`` gives an acked or a refused entry."""
    if resp.code == ResponseCode.SUCCESS:
        return _OK  # protobuf copies it into the answer
    refused = MQBrokerError(resp.code, resp.remark, addr)
    return status(mp.code_of_remoting(resp.code), str(refused))


def ack_answer(entry: Any, resp: RemotingCommand, addr: str) -> spb.AckMessageResponse:
    """The AckMessage answer of one ``entry`` from the broker's response to its ACK_MESSAGE
    (what ``ProxyService.ack_message`` answers for one entry)."""
    st = ack_status(resp, addr)
    out = spb.AckMessageResponse(status=st)
    out.entries.add(message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=st)
    return out


def ack_results(entries: Sequence[Any], statuses: Sequence[Any]) -> spb.AckMessageResponse:
    """The AckMessage answer of ``entries`` with their ``statuses`` (None: acknowledged): OK
    when every one is, the common status when all failed alike, MULTIPLE_RESULTS otherwise."""
    results = [
        spb.AckMessageResultEntry(
            message_id=e.message_id,
            receipt_handle=e.receipt_handle,
            status=st if st is not None else _OK,
        )
        for e, st in zip(entries, statuses, strict=True)
    ]
    codes = {r.status.code for r in results}
    overall = (
        _OK
        if codes <= {Code.OK}
        else (results[0].status if len(codes) == 1 else status(Code.MULTIPLE_RESULTS, ""))
    )
    return spb.AckMessageResponse(status=overall, entries=results)


def ack_ext(group: str, topic: str, receipt: Receipt) -> dict[str, str]:
    """The ACK_MESSAGE extFields of a decoded receipt handle: what ``ack_command`` gives for
    ``ProxyService.received`` of it (a test checks it), without the stub message and the
    second parse of its extra info."""
    extra = receipt.extra
    offset = extra.queue_offset if extra.queue_offset is not None else 0
    return {
        "consumerGroup": group,
        "topic": topic,
        "queueId": str(extra.queue_id),
        "extraInfo": extra.build(),
        "offset": str(offset),
    }


_OK = status(Code.OK)
