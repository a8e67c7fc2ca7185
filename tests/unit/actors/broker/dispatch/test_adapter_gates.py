"""The remoting adapter's gates (actors/broker/dispatch/adapter.py): unknown codes and a stopping
broker are answered, not dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.processors import (
    RC,
    broker_config,
)
from tests.harness.sim_network import SimNetwork


class _Conn:
    """Just enough of a Connection for the adapter: attrs, remote, closed, send_nowait."""

    def __init__(self) -> None:
        self.attrs: dict[str, Any] = {}
        self.remote = "10.0.0.9:5555"
        self.closed = False
        self.sent: list[RemotingCommand] = []

    def send_nowait(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)


async def test_adapter_gates_unknown_codes_and_a_stopping_broker(tmp_path: Path) -> None:
    broker = Broker(broker_config(tmp_path), SimNetwork().transport("10.0.0.2"))  # not started
    adapter, conn = broker.adapter, _Conn()

    async def call(code: int, **ext: str) -> RemotingCommand | None:
        cmd = RemotingCommand(code, opaque=7, ext_fields=ext)
        return await adapter.process(RequestContext(conn, cmd))  # type: ignore[arg-type]

    unknown = await call(9999)
    assert unknown is not None and unknown.code == RC.REQUEST_CODE_NOT_SUPPORTED
    assert unknown.remark == "request type 9999 (9999) not supported by broker broker-a"
    adapter.stop_taking_requests()
    busy = await call(RequestCode.SEND_MESSAGE_V2)
    assert busy is not None and (busy.code, busy.remark) == (
        RC.SYSTEM_BUSY,
        "broker broker-a is shutting down",
    )
    # a leaving client may still save its progress
    saved = await call(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        consumerGroup="CG",
        topic="T",
        queueId="0",
        commitOffset="12",
    )
    assert saved is not None and saved.code == RC.SUCCESS
    assert broker.offsets.query("CG", "T", 0) == 12
