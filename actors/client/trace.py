"""Client message tracing (``ClientConfig.trace``): the log lines `rocketrio analyze` joins.

Not upstream's message trace (which sends trace records to a trace topic): here every
acknowledged send is one ``trace_send_acked`` line and every message a consumer hands to the
application and that the application consumed is one ``trace_consumed`` line, both keyed by the
message's client id (UNIQ_KEY, `SendResult.msg_id` / `MessageExt.msg_id`). The producer writes
its lines itself (actors/client/producer.py); consumers call `trace_consumed`.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt

log = structlog.get_logger("trace")


def trace_consumed(
    group: str, client_id: str, mq: MessageQueue, msgs: Sequence[MessageExt]
) -> None:
    """One ``trace_consumed`` line per message of ``msgs`` (pulled from ``mq``)."""
    for m in msgs:
        events.emit(
            log,
            events.TraceConsumed(
                msg_id=m.msg_id,
                topic=m.topic,
                broker=mq.brokerName,
                queue_id=m.queue_id,
                queue_offset=m.queue_offset,
                group=group,
                client_id=client_id,
                reconsume_times=m.reconsume_times,
            ),
        )
