"""The request-code census (docs/request-codes.md, SPEC M11) against the running code.

Every role's request table is built as start-up builds it, without sockets: a broker (classic and
controller mode), a broker container, a NameServer (its table keys), a controller and a client
(their processors, probed: a code is served when the answer is not REQUEST_CODE_NOT_SUPPORTED).
The test fails when the page and the tables disagree about any code, when the page's upstream
list is not upstream 5.2.0's (`protocol/upstream_codes.py`), and when an unserved code is not
answered REQUEST_CODE_NOT_SUPPORTED with its number and name.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.broker.container.config import BrokerContainerConfig
from rocketrio.actors.broker.container.container import BrokerContainer
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.controller.bench_hook import CONTROLLER_BENCH_PROPOSE
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.controller import Controller
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import NameServer
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.controller_headers import CONTROLLER_CHECK_BROKER_ALIVE
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError
from rocketrio.protocol.upstream_codes import REFUSED_CODES, UPSTREAM_REQUEST_CODES
from tests.harness.paths import REPO
from tests.harness.processors import broker_config
from tests.harness.sim_network import SimNetwork

PAGE = REPO / "docs" / "request-codes.md"
ROLES = ("namesrv", "broker", "controller", "container", "client")
STATUSES = ("served", "refused", "not yet")
Processor = Callable[[RequestContext], Awaitable[RemotingCommand | None]]


@attrs.frozen
class Row:
    code: int
    name: str
    status: str
    roles: frozenset[str]
    note: str


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _codes(cell: str) -> range:
    """``1105`` or a range ``3001-3010``."""
    first, _, last = cell.partition("-")
    return range(int(first), int(last or first) + 1)


def _roles(cell: str) -> frozenset[str]:
    roles = frozenset(r.strip() for r in cell.split(",")) - {"-"}
    assert roles <= set(ROLES), f"unknown role in {cell!r}"
    return roles


def parse_page(text: str) -> tuple[list[Row], dict[int, frozenset[str]]]:
    """The census rows (code, name, status, roles) and the extra codes (code -> roles)."""
    census: list[Row] = []
    extra: dict[int, frozenset[str]] = {}
    for line in text.splitlines():
        if not re.match(r"\|\s*\d", line):
            continue
        cells = _cells(line)
        if len(cells) == 5:
            code, name, status, by, note = cells
            assert status in STATUSES, f"bad status in {line!r}"
            census.append(Row(int(code), name, status, _roles(by), note))
        else:
            code_cell, _name, by, _note = cells
            for code in _codes(code_cell):
                extra[code] = _roles(by)
    return census, extra


class _Conn:
    """Just enough of a Connection for a processor."""

    def __init__(self) -> None:
        self.attrs: dict[str, Any] = {}
        self.remote = "10.0.0.9:5555"
        self.closed = False
        self.sent: list[RemotingCommand] = []

    def send_nowait(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)


async def _answer(processor: Processor, code: int) -> RemotingCommand | str | None:
    ctx = RequestContext(_Conn(), RemotingCommand(code, opaque=1))  # type: ignore[arg-type]
    try:
        return await processor(ctx)
    except HeaderError as e:  # the connection answers INVALID_PARAMETER: the code is served
        return f"HeaderError: {e}"


def _not_supported(answer: RemotingCommand | str | None) -> bool:
    return (
        isinstance(answer, RemotingCommand)
        and answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    )


@attrs.define
class Role:
    """One role as start-up builds it: its table (when it has one) and its processor."""

    processor: Processor
    table: frozenset[int] | None  # None: served codes found by probing the processor


def _candidates() -> set[int]:
    private = {CONTROLLER_CHECK_BROKER_ALIVE, CONTROLLER_BENCH_PROPOSE}
    return set(UPSTREAM_REQUEST_CODES) | {int(c) for c in RequestCode} | private


async def build_roles(tmp: Path) -> dict[str, list[Role]]:
    net = SimNetwork(seed=29)
    classic = Broker(broker_config(tmp / "classic"), net.transport("10.0.0.2"))
    in_controller_mode = Broker(
        broker_config(tmp / "dledger", enableControllerMode=True, controllerAddr="10.0.0.5:9878"),
        net.transport("10.0.0.3"),
    )
    container = BrokerContainer(
        BrokerContainerConfig(brokerContainerIP="10.0.0.6", namesrvAddr="10.0.0.4:9876"),
        net.transport("10.0.0.6"),
        lambda config: Broker(config, net.transport("10.0.0.8")),
        now_ms=lambda: 0,
    )
    namesrv = NameServer(NamesrvConfig(), net.transport("10.0.0.4"))
    controller = Controller(
        ControllerConfig(
            controllerDLegerGroup="g",
            controllerDLegerPeers="n0-10.0.0.5:9878",
            controllerDLegerSelfId="n0",
            controllerStorePath=str(tmp / "ctrl"),
        ),
        net.transport("10.0.0.5"),
    )
    client = MQClientInstance("10.0.0.4:9876", transport=net.transport("10.0.0.7"))
    return {
        "broker": [
            Role(b.requests.process, frozenset(b.requests.handlers))
            for b in (classic, in_controller_mode)
        ],
        "container": [Role(container.requests.process, frozenset(container.requests.handlers))],
        "namesrv": [Role(namesrv.process, frozenset(namesrv._processors))],
        "controller": [Role(controller.process, None)],
        "client": [Role(client._process, None)],
    }


async def served_codes(role: Role, candidates: Iterable[int]) -> set[int]:
    if role.table is not None:
        return set(role.table)
    return {c for c in candidates if not _not_supported(await _answer(role.processor, c))}


def test_the_page_lists_upstream_5_2_0_codes_once_each() -> None:
    census, _ = parse_page(PAGE.read_text())
    assert [(r.code, r.name) for r in census] == list(UPSTREAM_REQUEST_CODES.items())
    assert len(census) == 147
    # where rocketrio names a code, it uses upstream's number
    for code in RequestCode:
        if code.name in UPSTREAM_REQUEST_CODES.values():
            assert UPSTREAM_REQUEST_CODES[int(code)] == code.name
    for row in census:
        assert (row.status == "served") == bool(row.roles), row
        assert row.status == "served" or row.note, f"{row.code}: say why it is not served"
    # the refused rows are the codes refused in code, with the reason the servers give
    refused = {r.code: r.note for r in census if r.status == "refused"}
    assert refused == dict(REFUSED_CODES)
    counts = {s: sum(r.status == s for r in census) for s in STATUSES}
    line = f"Counts: {counts['served']} served, {counts['refused']} refused, "
    assert line + f"{counts['not yet']} not yet." in PAGE.read_text()


async def test_the_page_and_the_request_tables_agree(tmp_path: Path) -> None:
    census, extra = parse_page(PAGE.read_text())
    roles = await build_roles(tmp_path)
    candidates = _candidates() | set(extra)
    actual: dict[int, set[str]] = {}
    for name, instances in roles.items():
        for role in instances:
            for code in await served_codes(role, candidates):
                actual.setdefault(code, set()).add(name)
    documented = {r.code: set(r.roles) for r in census if r.roles}
    documented.update({code: set(by) for code, by in extra.items()})
    wrong = {
        code: (documented.get(code, set()), actual.get(code, set()))
        for code in set(documented) | set(actual)
        if documented.get(code, set()) != actual.get(code, set())
    }
    assert not wrong, f"code: (page says, tables serve): {wrong}"


@pytest.mark.parametrize("role_name", ROLES)
async def test_every_unserved_code_is_refused_by_number_and_name(
    tmp_path: Path, role_name: str
) -> None:
    census, _ = parse_page(PAGE.read_text())
    (role, *_) = (await build_roles(tmp_path))[role_name]
    served = await served_codes(role, _candidates())
    unserved = [r for r in census if r.code not in served]
    assert unserved
    for row in unserved:
        with trio.fail_after(1):
            answer = await _answer(role.processor, row.code)
        assert isinstance(answer, RemotingCommand), (role_name, row)
        assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED, (role_name, row)
        assert f"{row.code} ({row.name})" in (answer.remark or ""), (role_name, answer.remark)
        if row.status == "refused":  # and why, for a code refused on purpose
            assert (answer.remark or "").endswith(f": {row.note}"), (role_name, answer.remark)
