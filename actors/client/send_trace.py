"""The producer's trace lines (ClientConfig.trace): one ``trace_send_acked`` per acknowledged
message and one ``trace_send_failed`` per failed send, the records `rocketrio analyze` joins
with the consumers' to find lost and duplicated messages."""

from __future__ import annotations

import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.message import SendResult, SendStatus
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.observe import events

log = structlog.get_logger("producer")


def acked(result: SendResult, started: float, group: str, client_id: str) -> None:
    """One trace_send_acked line per message of an acknowledged send (a batch's ids are
    comma-separated, at consecutive queue offsets)."""
    if result.send_status is not SendStatus.SEND_OK:
        return
    mq = result.message_queue
    latency_ms = round((aio.current_time() - started) * 1000)
    sent_ms = wallclock_ms() - latency_ms  # read now: the line's ts is stamped later
    for i, msg_id in enumerate(result.msg_id.split(",")):
        events.emit(
            log,
            events.TraceSendAcked(
                msg_id=msg_id,
                topic=mq.topic,
                broker=mq.brokerName,
                queue_id=mq.queueId,
                queue_offset=result.queue_offset + i,
                producer_group=group,
                client_id=client_id,
                latency_ms=latency_ms,
                sent_ms=sent_ms,
            ),
        )


def failed(topic: str, broker: str | None, exc: BaseException, group: str, client_id: str) -> None:
    """One trace_send_failed line for a send that was not acknowledged."""
    events.emit(
        log,
        events.TraceSendFailed(
            topic=topic,
            broker=broker,
            producer_group=group,
            client_id=client_id,
            error=f"{type(exc).__name__}: {exc}",
        ),
    )
