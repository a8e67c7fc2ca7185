"""Orphaned transaction recovery through the proxy: a broker's CHECK_TRANSACTION_STATE for a
half message sent through the proxy (producer group PROXY_SEND_GROUP, which the proxy registers
on the brokers) becomes a RecoverOrphanedTransactionCommand on the Telemetry stream of one
producer client publishing the topic (upstream's proxy does the same); the client's checker
answers with EndTransaction (source SERVER_CHECK), which the proxy turns into END_TRANSACTION.

`recover_command` is pure; `TransactionCheckRelay.on_check` is the MQClientInstance callback.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from rocketrio.actors.observe import events
from rocketrio.actors.proxy import mapping as mp
from rocketrio.actors.proxy.receipt import TransactionId
from rocketrio.actors.proxy.telemetry import TelemetryRegistry
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.headers import CheckTransactionStateRequestHeader
from rocketrio.protocol.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_ID,
    MessageDecodeError,
    MessageExt,
    decode_stored,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext

log = structlog.get_logger("proxy")


def recover_command(
    msg: MessageExt, header: CheckTransactionStateRequestHeader, broker_name: str
) -> spb.TelemetryCommand:
    """The command that asks a producer to resolve the half message ``msg``."""
    broker_tx = header.transactionId or msg.properties.get(PROPERTY_TRANSACTION_ID) or ""
    tx = TransactionId(
        broker_name, header.commitLogOffset, header.tranStateTableOffset, broker_tx
    ).encode()
    message = mp.received_message(msg, msg.topic, None, 0)
    return spb.TelemetryCommand(
        recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
            message=message, transaction_id=tx
        )
    )


class TransactionCheckRelay:
    def __init__(self, registry: TelemetryRegistry, broker_name_of: Callable[[str], str]) -> None:
        self.registry = registry
        # broker address -> broker set name (the route's; a check header may lack bname)
        self.broker_name_of = broker_name_of

    def on_check(self, broker_addr: str, cmd: RemotingCommand) -> bool:
        """True when the check was for the proxy's group (pushed to a producer, or dropped
        when no producer of the topic is connected: the broker asks again later)."""
        try:
            msg = decode_stored(cmd.body)[0]
            header = from_ext(CheckTransactionStateRequestHeader, cmd.ext_fields)
        except (MessageDecodeError, HeaderError, IndexError):
            return False
        if msg.properties.get(PROPERTY_PRODUCER_GROUP) != mp.PROXY_PRODUCER_GROUP:
            return False
        broker_name = header.bname or self.broker_name_of(broker_addr)
        stream = self.registry.producer_for(msg.topic)
        pushed = stream is not None and stream.push(recover_command(msg, header, broker_name))
        events.emit(
            log,
            events.ProxyTransactionCheck(
                topic=msg.topic,
                msg_id=msg.msg_id,
                client_id=stream.client_id if stream is not None else None,
                pushed=bool(pushed),
            ),
        )
        return True
