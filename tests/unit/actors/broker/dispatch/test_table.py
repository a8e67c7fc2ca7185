"""The one request table (actors/broker/dispatch/table.py): built once from the packages'
declarations, a code claimed twice or a wrapper of an unserved code refused at start; a broker's
table answers unknown codes and a stopping broker, never drops them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.broker.dispatch.table import (
    Handler,
    Handlers,
    RequestTable,
    RequestTableError,
    build_table,
)
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.processors import (
    RC,
    broker_config,
)
from tests.harness.sim_network import SimNetwork


class _Conn:
    """Just enough of a Connection for the table: attrs, remote, closed, send_nowait."""

    def __init__(self) -> None:
        self.attrs: dict[str, Any] = {}
        self.remote = "10.0.0.9:5555"
        self.closed = False
        self.sent: list[RemotingCommand] = []

    def send_nowait(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)


async def test_the_broker_table_gates_unknown_codes_and_a_stopping_broker(tmp_path: Path) -> None:
    broker = Broker(broker_config(tmp_path), SimNetwork().transport("10.0.0.2"))  # not started
    requests, conn = broker.requests, _Conn()

    async def call(code: int, **ext: str) -> RemotingCommand | None:
        cmd = RemotingCommand(code, opaque=7, ext_fields=ext)
        return await requests.process(RequestContext(conn, cmd))  # type: ignore[arg-type]

    unknown = await call(9999)
    assert unknown is not None and unknown.code == RC.REQUEST_CODE_NOT_SUPPORTED
    assert unknown.remark == "request type 9999 (9999) not supported by broker broker-a"
    requests.stop_taking_requests()
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
    assert broker.tables.offsets.query("CG", "T", 0) == 12


def _handler(tag: str) -> Handler:
    async def handle(ctx: RequestContext) -> RemotingCommand:
        return ctx.cmd.make_response(RC.SUCCESS, tag)

    return handle


async def _answer(table: RequestTable, code: int) -> RemotingCommand | None:
    cmd = RemotingCommand(code, opaque=1)
    return await table.process(RequestContext(_Conn(), cmd))  # type: ignore[arg-type]


def test_a_code_declared_by_two_packages_is_refused_naming_both() -> None:
    with pytest.raises(RequestTableError, match="declared by both send and pop"):
        build_table([("send", {10: _handler("a")}), ("pop", {10: _handler("b")})])


def test_a_wrapper_may_replace_served_codes_only() -> None:
    def wrap_unknown(plain: Handlers) -> Handlers:
        return {11: _handler("w")}

    with pytest.raises(RequestTableError, match=r"static_topic wraps codes nobody serves: \[11\]"):
        build_table([("send", {10: _handler("a")})], [("static_topic", wrap_unknown)])


async def test_a_wrapper_sees_the_plain_table_and_replaces_its_entries() -> None:
    seen: dict[int, Handler] = {}

    def wrap(plain: Handlers) -> Handlers:
        seen.update(plain)
        inner = plain[10]

        async def wrapped(ctx: RequestContext) -> RemotingCommand | None:
            resp = await inner(ctx)
            assert resp is not None
            return ctx.cmd.make_response(resp.code, f"wrapped {resp.remark}")

        return {10: wrapped}

    table = build_table(
        [("send", {10: _handler("a")}), ("pull", {11: _handler("b")})], [("s", wrap)]
    )
    assert set(seen) == {10, 11}
    requests = RequestTable("b", table)
    sent, pulled = await _answer(requests, 10), await _answer(requests, 11)
    assert sent is not None and sent.remark == "wrapped a"
    assert pulled is not None and pulled.remark == "b"
    with pytest.raises(TypeError):
        table[12] = _handler("late")  # type: ignore[index]  # built once, read-only after


async def test_the_gate_answers_before_any_handler() -> None:
    def gate(ctx: RequestContext) -> RemotingCommand | None:
        return ctx.cmd.make_response(RC.NO_PERMISSION, "no")

    requests = RequestTable("b", build_table([("send", {10: _handler("a")})]), gate=gate)
    for code in (10, 9999):
        resp = await _answer(requests, code)
        assert resp is not None and (resp.code, resp.remark) == (RC.NO_PERMISSION, "no")
