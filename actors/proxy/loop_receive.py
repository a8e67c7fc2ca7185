"""ReceiveMessage answered on the gRPC loop (cluster mode): the POP written on the loop's own
connection to the broker set's master and the popped messages turned into the answer there,
with no hop to Trio and no Trio task, as loop_remoting.py does for sends and acks.

Per message of an SDK receive + ack the proxy spent ~80 us in Trio (the hop, a task, the
client's POP machinery, the thread switches) besides the conversion itself
(docs/benchmarks.md, issue 28 item 4, fourth pass). The loop takes a receive only when the
Trio path would do nothing more than one POP and this conversion (`LoopReceive.start`): the
request names its broker set (the SDKs do), filters by tag, asks no auto renewal, has a valid
batch size and invisible time, and its (group, topic) was served by Trio within the group
config cache's time (`allow`: Trio saw the group is not FIFO, so its receives are unordered
POPs, and subscribed the topic, so its route is kept fresh and published to the loop).
Everything else takes the Trio path (`ProxyService.receive_message`), which answers the same
shapes (`receive_answers` is both paths' builder).

Failures keep the Trio path's promises: a POP given up because the route named a new master
while it was parked at a hung one (`MasterChanged`, after `wait + STUCK_AFTER_S` the topic's
route is asked for every `POLL_S`) or a lost connection goes to Trio (`TO_TRIO`), which POPs at
the master the route names, as the client's ``_pop_at_master`` does; a POP unanswered by its
deadline (the consumer's 3 s + the long poll) and a broker's refusal answer as the Trio path
does (INTERNAL_SERVER_ERROR, the mapped code); a long poll that ended empty asks Trio to
refresh the topic's route, as the client does for a deposed master.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from rocketrio.actors.client.errors import MQBrokerError
from rocketrio.actors.client.simple_consumer import (
    EMPTY_POP_CODES,
    MAX_RECEIVE,
    ReceivedMessage,
    popped_messages,
)
from rocketrio.actors.client.stuck_sends import POLL_S, STUCK_AFTER_S, MasterChanged
from rocketrio.actors.kernel.remoting import RemotingError, RemotingTimeout
from rocketrio.actors.proxy import mapping as mp
from rocketrio.actors.proxy.grpc_bridge import TO_TRIO
from rocketrio.actors.proxy.mapping import Code, status
from rocketrio.actors.proxy.receipt import encode_receipt
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.pop_extra_info import INIT_MODE_MAX
from rocketrio.protocol.remoting import RemotingCommand

DEFAULT_INVISIBLE_MS = 30_000
# a receive's long poll is capped (upstream grpcClientConsumerMaxLongPollingTimeoutMillis)
MAX_POLL_MS = 30_000
POP_TIMEOUT_S = 3.0  # the SimpleConsumer's request timeout, the long poll on top

ErrorAnswer = Callable[[str, BaseException], Any]
# each received message and its handle (the Trio path's auto renewal tracks them)
OnReceived = Callable[[ReceivedMessage, str], None]


def receive_answers(
    got: list[ReceivedMessage],
    topic: str,
    invisible_ms: int,
    delivery_ms: int,
    on_received: OnReceived | None = None,
) -> list[spb.ReceiveMessageResponse]:
    """The ReceiveMessage stream of popped messages (upstream's proxy writes the same): the
    delivery timestamp, one message each (its handle from `encode_receipt`), the status."""
    out = [spb.ReceiveMessageResponse(delivery_timestamp=mp.timestamp_ms(delivery_ms))]
    for m in got:
        message = m.message
        handle = encode_receipt(m.receipt_handle, message.queue_offset, message.commitlog_offset)
        if on_received is not None:
            on_received(m, handle)
        out.append(answer := spb.ReceiveMessageResponse())
        mp.fill_received(answer.message, message, topic, handle, invisible_ms)
    code = Code.OK if got else Code.MESSAGE_NOT_FOUND
    out.append(spb.ReceiveMessageResponse(status=status(code, "OK" if got else "no message")))
    return out


def pop_ext(
    group: str,
    topic: str,
    expression: str,
    batch: int,
    invisible_ms: int,
    poll_ms: int,
    born_ms: int,
) -> dict[str, str]:
    """The POP_MESSAGE extFields of an unordered tag-filtered POP of any queue: what
    ``to_ext(PopMessageRequestHeader(...))`` gives for the Trio path's POP (a test holds them
    equal)."""
    return {
        "consumerGroup": group,
        "topic": topic,
        "queueId": "-1",
        "maxMsgNums": str(batch),
        "invisibleTime": str(invisible_ms),
        "pollTime": str(poll_ms),
        "bornTime": str(born_ms),
        "initMode": str(INIT_MODE_MAX),
        "expType": "TAG",
        "exp": expression or "*",
    }


class Connection(Protocol):
    """What `LoopReceive` needs of a loop connection (`LoopConnection`)."""

    async def request(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand: ...


class LoopReceive:
    """The receives `LoopCalls` answers on the gRPC loop (module docstring)."""

    def __init__(
        self, error_answer: ErrorAnswer, now_ms: Callable[[], int], refresh: Callable[[str], object]
    ) -> None:
        self.error_answer = error_answer
        self.now_ms = now_ms
        self.refresh = refresh  # any thread: ask Trio to refresh the topic's route soon
        self.timeout_s = POP_TIMEOUT_S
        self.stuck_after_s = STUCK_AFTER_S  # past the long poll: the POP looks at its route
        # (group, topic) -> until when (ms) the loop may take its receives; Trio replaces it
        self.receivable: Mapping[tuple[str, str], int] = {}

    def allow(self, group: str, topic: str, until_ms: int) -> None:
        """Trio's thread: ``group``'s receives of ``topic`` are unordered POPs until
        ``until_ms`` (a new dict: the loop only reads immutable values)."""
        self.receivable = {**self.receivable, (group, topic): until_ms}

    def start(
        self,
        req: Any,
        masters: Mapping[str, str] | None,
        connection: Callable[[str | None], Any],
    ) -> Awaitable[Any] | None:
        """The answer of ReceiveMessage ``req``, to await on the loop; None: the Trio path
        takes it (``masters``: the broker sets' masters of its topic's published route)."""
        topic, group = req.message_queue.topic.name, req.group.name
        until = self.receivable.get((group, topic))
        if until is None or masters is None or req.auto_renew:
            return None
        if req.filter_expression.type == pb.SQL or not 0 < req.batch_size <= MAX_RECEIVE:
            return None
        invisible_ms = DEFAULT_INVISIBLE_MS
        if req.HasField("invisible_duration"):
            invisible_ms = mp.ms_of_duration(req.invisible_duration)
        broker = req.message_queue.broker.name
        now = self.now_ms()
        if invisible_ms <= 0 or not broker or now >= until:
            return None
        addr = masters.get(broker)
        conn = connection(addr)
        if addr is None or conn is None:
            return None
        poll_ms = min(mp.ms_of_duration(req.long_polling_timeout), MAX_POLL_MS)
        ext = pop_ext(
            group, topic, req.filter_expression.expression, req.batch_size, invisible_ms,
            poll_ms, now,
        )  # fmt: skip
        cmd = RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=ext)
        return self._receive(conn, cmd, topic, broker, addr, invisible_ms, poll_ms / 1000)

    async def _receive(
        self,
        conn: Connection,
        cmd: RemotingCommand,
        topic: str,
        broker: str,
        addr: str,
        invisible_ms: int,
        wait_s: float,
    ) -> Any:
        loop = asyncio.get_running_loop()
        watch: list[asyncio.TimerHandle] = []
        watch.append(loop.call_later(wait_s + self.stuck_after_s, self._stuck, topic, watch))
        try:
            resp = await conn.request(cmd, self.timeout_s + wait_s)
            if resp.code in EMPTY_POP_CODES:
                if wait_s > 0:  # a deposed master answers so forever: look at the route
                    self.refresh(topic)
                got = []
            elif resp.code != ResponseCode.SUCCESS:
                raise MQBrokerError(resp.code, resp.remark, addr)
            else:
                got = popped_messages(resp, topic, broker, False)
            return receive_answers(got, topic, invisible_ms, self.now_ms())
        except MasterChanged:
            return TO_TRIO  # Trio POPs at the master the route names now
        except RemotingTimeout as e:
            return self.error_answer("ReceiveMessage", e)
        except RemotingError:
            self.refresh(topic)
            return TO_TRIO
        except Exception as e:
            return self.error_answer("ReceiveMessage", e)
        finally:
            for handle in watch:
                handle.cancel()

    def _stuck(self, topic: str, watch: list[asyncio.TimerHandle]) -> None:
        """A POP unanswered past its long poll: its topic's route is asked for every `POLL_S`
        (a new master in it gives the POP up, see `LoopCalls.publish`)."""
        self.refresh(topic)
        watch[:] = [asyncio.get_running_loop().call_later(POLL_S, self._stuck, topic, watch)]
