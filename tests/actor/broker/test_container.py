"""The broker container on the simulated network (actors/broker/container/): several brokers in
one container, ADD_BROKER / REMOVE_BROKER / GET_BROKER_CONFIG at runtime with their refusals,
and supervision one member at a time (a crash restarts that member only; one that keeps failing
is given up and removed while the others serve on).

A real NameServer and real Brokers; blocking store work inline and MockClock autojump (see
test_boot.py). The broker config files are real files under tmp_path, as ADD_BROKER reads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.broker.container.config import BrokerContainerConfig
from rocketrio.actors.broker.container.container import (
    BrokerContainer,
    BrokerMember,
    MemberBroker,
)
from rocketrio.actors.broker.container.registry import BrokerIdentity
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import run_namesrv
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.config import parse_properties
from rocketrio.protocol.container_headers import AddBrokerRequestHeader, RemoveBrokerRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext
from tests.harness.blocking import inline_blocking
from tests.harness.broker import BROKER_HOST, CLIENT_HOST, NAMESRV_HOST, BrokerHarness, messages
from tests.harness.clock import EPOCH_MS
from tests.harness.sim_network import SimNetwork

CONTAINER_PORT = 10951
A_PORT, B_PORT, C_PORT = 10911, 10921, 10931


def _now_ms() -> int:
    return EPOCH_MS + int(trio.current_time() * 1000)


def write_conf(root: Path, name: str, port: int, **extra: Any) -> str:
    """A broker config file on the container's host (no namesrvAddr: the container's)."""
    values = {
        "brokerName": name,
        "brokerIP1": BROKER_HOST,
        "listenPort": port,
        "storePathRootDir": str(root / "store" / name),
        "mappedFileSizeCommitLog": 256 * 1024,
        "mappedFileSizeConsumeQueue": 1000 * 20,
        **extra,
    }
    path = root / f"{name}.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return str(path)


class Raw(BrokerHarness):
    """BrokerHarness's raw requests (send, pull, route) aimed at any address (``target``)."""

    target = ""

    @property
    def addr(self) -> str:
        return self.target

    async def to(self, addr: str, cmd: RemotingCommand) -> RemotingCommand:
        return await self.invoke(cmd, addr)

    async def add(self, path: str | None) -> RemotingCommand:
        header = to_ext(AddBrokerRequestHeader(configPath=path))
        return await self.to(CONTAINER, RemotingCommand(RequestCode.ADD_BROKER, ext_fields=header))

    async def remove(self, name: str, broker_id: int = 0) -> RemotingCommand:
        header = to_ext(RemoveBrokerRequestHeader(name, "DefaultCluster", broker_id))
        cmd = RemotingCommand(RequestCode.REMOVE_BROKER, ext_fields=header)
        return await self.to(CONTAINER, cmd)

    async def status(self) -> dict[str, str]:
        resp = await self.to(CONTAINER, RemotingCommand(RequestCode.GET_BROKER_CONFIG))
        assert resp.code == ResponseCode.SUCCESS
        assert '"counter"' in resp.ext_fields["version"]
        return parse_properties(resp.body.decode())

    async def send_to(self, addr: str, topic: str, body: bytes) -> RemotingCommand:
        self.target = addr
        return await self.send(topic, body)

    async def read(self, addr: str, topic: str) -> list[bytes]:
        self.target = addr
        bodies: list[bytes] = []
        for queue_id in range(8):
            resp = await self.pull(topic, queue_id, 0)
            if resp.code == ResponseCode.SUCCESS:
                bodies += [m.body for m in messages(resp)]
        return sorted(bodies)

    async def brokers_of(self, name: str) -> dict[int, str]:
        route = await self.route(name)
        if route is None:
            return {}
        return {bid: a for bd in route.brokerDatas for bid, a in bd.brokerAddrs.items()}


CONTAINER = f"{BROKER_HOST}:{CONTAINER_PORT}"
Factory = Callable[[BrokerConfig], MemberBroker]


def sim_brokers(net: SimNetwork) -> Factory:
    def make(config: BrokerConfig) -> MemberBroker:
        broker = Broker(
            config, net.transport(BROKER_HOST), now_ms=_now_ms, run_blocking=inline_blocking
        )
        return BrokerMember(broker)

    return make


@asynccontextmanager
async def cluster(
    root: Path,
    paths: list[str],
    *,
    factory: Callable[[SimNetwork], Factory] = sim_brokers,
    max_restarts: int = 5,
    config_path: str | None = None,
) -> AsyncIterator[tuple[Raw, BrokerContainer]]:
    net = SimNetwork(seed=27)
    async with trio.open_nursery() as nursery:
        raw = Raw(nursery, net, str(root))
        ns_cfg = NamesrvConfig(listenHost=NAMESRV_HOST)
        raw.namesrv_addr = await nursery.start(run_namesrv, ns_cfg, net.transport(NAMESRV_HOST))
        config = BrokerContainerConfig(
            brokerContainerIP=BROKER_HOST,
            listenPort=CONTAINER_PORT,
            namesrvAddr=raw.namesrv_addr,
            brokerConfigPaths=":".join(paths),
            containerMaxRestarts=max_restarts,
        )
        container = BrokerContainer(
            config, net.transport(BROKER_HOST), factory(net), now_ms=_now_ms,
            config_path=config_path, run_blocking=inline_blocking,
        )  # fmt: skip
        async with RemotingClient(net.transport(CLIENT_HOST)) as client:
            raw.client = client
            scope, stopped = trio.CancelScope(), trio.Event()

            async def run(*, task_status: trio.TaskStatus[Any]) -> None:
                try:
                    with scope:
                        await container.run(task_status=task_status)
                finally:
                    stopped.set()

            await nursery.start(run)
            yield raw, container
            scope.cancel()  # a graceful stop of every member, the NameServer still up
            await stopped.wait()
        nursery.cancel_scope.cancel()


async def test_members_serve_and_brokers_are_added_and_removed_at_runtime(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    a = write_conf(tmp_path, "broker-a", A_PORT)
    b = write_conf(tmp_path, "broker-b", B_PORT, brokerId=1, brokerRole="SLAVE")
    c = write_conf(tmp_path, "broker-c", C_PORT)
    a_addr, c_addr = f"{BROKER_HOST}:{A_PORT}", f"{BROKER_HOST}:{C_PORT}"
    async with cluster(tmp_path, [a, b]) as (raw, container):
        # both members registered with the container's NameServer, each on its own port
        assert await raw.brokers_of("broker-a") == {0: a_addr}
        assert await raw.brokers_of("broker-b") == {1: f"{BROKER_HOST}:{B_PORT}"}
        assert (await raw.send_to(a_addr, "T", b"m1")).code == ResponseCode.SUCCESS
        master = container.registry.peek_master()
        assert master is not None and master.identity == BrokerIdentity(
            "DefaultCluster", "broker-a", 0
        )

        assert (await raw.add(c)).code == ResponseCode.SUCCESS
        await trio.sleep(2)
        assert await raw.brokers_of("broker-c") == {0: c_addr}
        assert (await raw.send_to(c_addr, "T", b"c1")).code == ResponseCode.SUCCESS
        status = await raw.status()
        assert status["brokerConfigPaths"] == f"{a}:{b}:{c}"
        assert status["containerMembers"].split(";") == [
            f"DefaultCluster_broker-a_0@{a_addr}",
            f"DefaultCluster_broker-b_1@{BROKER_HOST}:{B_PORT}",
            f"DefaultCluster_broker-c_0@{c_addr}",
        ]

        assert (await raw.remove("broker-c")).code == ResponseCode.SUCCESS
        assert container.registry.get(BrokerIdentity("DefaultCluster", "broker-c", 0)) is None
        assert await raw.brokers_of("broker-c") == {}  # unregistered on its graceful stop
        try:
            await raw.send_to(c_addr, "T", b"c2")
            raise AssertionError("a removed broker still answers")
        except RemotingError:
            pass
        assert (await raw.status())["brokerConfigPaths"] == f"{a}:{b}"
        # broker-a was never disturbed; broker-c can come back with its store
        assert await raw.read(a_addr, "T") == [b"m1"]
        assert (await raw.add(c)).code == ResponseCode.SUCCESS
        assert await raw.read(c_addr, "T") == [b"c1"]


async def test_add_and_remove_refusals(tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    a = write_conf(tmp_path, "broker-a", A_PORT)
    clash = write_conf(tmp_path, "broker-x", A_PORT + 1)  # broker-a's HA port
    bad_id = write_conf(tmp_path, "broker-y", C_PORT, brokerId=0, brokerRole="SLAVE")
    bad_key = tmp_path / "bad.conf"
    bad_key.write_text("brokerName=broker-z\nnoSuchKey=1\n")
    async with cluster(tmp_path, [a]) as (raw, container):
        cases = [
            (await raw.add(a), ResponseCode.SYSTEM_ERROR, "has already been added"),
            (await raw.add(clash), ResponseCode.SYSTEM_ERROR, "is already DefaultCluster_broker"),
            (await raw.add(bad_id), ResponseCode.SYSTEM_ERROR, "slave broker id must be > 0"),
            (await raw.add(str(bad_key)), ResponseCode.SYSTEM_ERROR, "noSuchKey"),
            (await raw.add(str(tmp_path / "nope.conf")), ResponseCode.SYSTEM_ERROR, "cannot read"),
            (await raw.add(None), ResponseCode.SYSTEM_ERROR, "config path is empty"),
            (await raw.remove("broker-q"), ResponseCode.BROKER_NOT_EXIST, "not in this container"),
            (await raw.remove("broker-a", 1), ResponseCode.BROKER_NOT_EXIST, "broker-a_1"),
        ]
        for resp, code, remark in cases:
            assert (resp.code, remark in (resp.remark or "")) == (code, True), resp.remark
        malformed = RemotingCommand(RequestCode.REMOVE_BROKER, ext_fields={"brokerName": "a"})
        resp = await raw.to(CONTAINER, malformed)
        assert resp.code == ResponseCode.INVALID_PARAMETER
        assert "brokerClusterName" in (resp.remark or "")
        assert [m.identity.broker_name for m in container.registry.members()] == ["broker-a"]
        assert (await raw.send_to(f"{BROKER_HOST}:{A_PORT}", "T", b"ok")).code == 0


async def test_a_crashed_member_is_restarted_alone(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    a = write_conf(tmp_path, "broker-a", A_PORT, flushDiskType="SYNC_FLUSH")
    b = write_conf(tmp_path, "broker-b", B_PORT)
    a_addr, b_addr = f"{BROKER_HOST}:{A_PORT}", f"{BROKER_HOST}:{B_PORT}"
    async with cluster(tmp_path, [a, b]) as (raw, container):
        assert (await raw.send_to(a_addr, "T", b"before")).code == ResponseCode.SUCCESS
        ident_a = BrokerIdentity("DefaultCluster", "broker-a", 0)
        first = container.registry.get(ident_a)
        broker = container.running(ident_a)
        assert broker is not None and first is not None
        assert container.registry.peek_master() == first  # the first master that joined
        broker.crash()  # like kill -9 of that broker alone
        with trio.fail_after(0.4):  # seen down before the first backoff (0.5 s) ends
            while (down := container.registry.get(ident_a)) is not None and down.serving:
                await trio.sleep(0.01)
        # while broker-a waits for its restart it is no escape target; broker-b serves on
        assert down is not None and not down.serving
        peek = container.registry.peek_master()
        assert peek is not None and peek.identity.broker_name == "broker-b"
        assert "broker-a_0@10.0.0.2:10911(down)" in (await raw.status())["containerMembers"]
        assert (await raw.send_to(b_addr, "T", b"b1")).code == ResponseCode.SUCCESS
        await trio.sleep(5)  # past the first backoff
        again = container.registry.get(ident_a)
        assert again is not None and again.writer is not first.writer  # a new broker
        assert again.serving and container.registry.peek_master() == again
        assert await raw.read(a_addr, "T") == [b"before"]  # recovered from its store
        assert (await raw.send_to(a_addr, "T", b"after")).code == ResponseCode.SUCCESS
        assert await raw.read(b_addr, "T") == [b"b1"]


class _Failing:
    """A member that serves, then fails a moment later, every time it is started."""

    def __init__(self, starts: list[int]) -> None:
        self.starts = starts

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        self.starts.append(1)
        task_status.started(self)
        await trio.sleep(1)
        raise RuntimeError("disk on fire")

    def crash(self) -> None:
        raise AssertionError("not used")

    @property
    def writer(self) -> Any:
        return object()


async def test_a_member_that_keeps_failing_is_given_up_and_the_others_serve(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    a = write_conf(tmp_path, "broker-a", A_PORT)
    f = write_conf(tmp_path, "broker-f", C_PORT)
    starts: list[int] = []

    def factory(net: SimNetwork) -> Factory:
        real = sim_brokers(net)

        def make(config: BrokerConfig) -> MemberBroker:
            return _Failing(starts) if config.brokerName == "broker-f" else real(config)

        return make

    async with cluster(tmp_path, [a, f], factory=factory, max_restarts=2) as (raw, container):
        await trio.sleep(60)
        assert len(starts) == 3  # the first start and 2 restarts, then given up
        names = [m.identity.broker_name for m in container.registry.members()]
        assert names == ["broker-a"]
        assert "broker-f" not in (await raw.status())["containerMembers"]
        resp = await raw.send_to(f"{BROKER_HOST}:{A_PORT}", "T", b"still")
        assert resp.code == ResponseCode.SUCCESS
        # the given-up broker can be added again once fixed
        assert (await raw.add(f)).code == ResponseCode.SUCCESS


class _NeverStarts:
    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        raise OSError("store locked by another broker")

    def crash(self) -> None:
        raise AssertionError("not used")

    @property
    def writer(self) -> Any:
        return object()


async def test_a_broker_that_cannot_start_is_refused(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    a = write_conf(tmp_path, "broker-a", A_PORT)
    n = write_conf(tmp_path, "broker-n", C_PORT)

    def factory(net: SimNetwork) -> Factory:
        real = sim_brokers(net)
        return lambda c: _NeverStarts() if c.brokerName == "broker-n" else real(c)

    async with cluster(tmp_path, [a], factory=factory) as (raw, container):
        resp = await raw.add(n)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert "start broker DefaultCluster_broker-n_0 failed: OSError: store locked" in (
            resp.remark or ""
        )
        assert [m.identity.broker_name for m in container.registry.members()] == ["broker-a"]
        assert (await raw.send_to(f"{BROKER_HOST}:{A_PORT}", "T", b"ok")).code == 0


async def test_admin_add_and_remove_broker_commands(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rocketrio admin addBroker` / `removeBroker` in-process against the container."""
    a = write_conf(tmp_path, "broker-a", A_PORT)
    c = write_conf(tmp_path, "broker-c", C_PORT)

    async with cluster(tmp_path, [a]) as (raw, container):

        async def admin(*argv: str) -> tuple[int, str, str]:
            capsys.readouterr()
            with structlog.testing.capture_logs():
                wiring = Wiring(raw.net.transport(CLIENT_HOST))
                code = await main_async(["admin", *argv, "-n", raw.namesrv_addr], wiring)
            out, err = capsys.readouterr()
            lines = [ln for ln in out.splitlines() if "boot success" not in ln]  # a member's
            return code, "\n".join(lines).strip(), err.strip()

        assert await admin("addBroker", "-c", CONTAINER, "-b", c) == (
            0,
            f"add broker to {CONTAINER} success",
            "",
        )
        assert [m.identity.broker_name for m in container.registry.members()] == [
            "broker-a",
            "broker-c",
        ]
        code, _, err = await admin("addBroker", "-c", CONTAINER, "-b", c)
        assert code == 1 and "has already been added to this container" in err
        ident = "DefaultCluster:broker-c:0"
        assert await admin("removeBroker", "-c", CONTAINER, "-b", ident) == (
            0,
            f"remove broker from {CONTAINER} success",
            "",
        )
        code, _, err = await admin("removeBroker", "-c", CONTAINER, "-b", ident)
        assert code == 1 and "BROKER_NOT_EXIST" in err and "not in this container" in err
        code, _, err = await admin("removeBroker", "-c", CONTAINER, "-b", "DefaultCluster:x")
        assert code == 2 and "expected clusterName:brokerName:brokerId" in err
        code, out, _ = await admin("getBrokerConfig", "-b", CONTAINER)
        assert code == 0 and f"DefaultCluster_broker-a_0@{BROKER_HOST}:{A_PORT}" in out


async def test_the_container_port_updates_and_answers_its_own_config(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rocketrio admin updateBrokerConfig -b <container>` changes the container's own keys
    (upstream BrokerContainerProcessor): written to its config file, shown by getBrokerConfig,
    the DataVersion bumped, and in effect (a failing member already running is given up after
    the new containerMaxRestarts); black-listed keys are NO_PERMISSION, unknown, start-only
    and bad values are refused, and nothing of a refused request changes."""
    a = write_conf(tmp_path, "broker-a", A_PORT)
    f = write_conf(tmp_path, "broker-f", C_PORT)
    conf = tmp_path / "container.conf"
    conf.write_text("containerMaxRestarts=5\n")
    starts: list[int] = []

    def factory(net: SimNetwork) -> Factory:
        real = sim_brokers(net)
        return lambda c: _Failing(starts) if c.brokerName == "broker-f" else real(c)

    async with cluster(tmp_path, [a], factory=factory, config_path=str(conf)) as (raw, container):

        async def admin(*argv: str) -> tuple[int, str, str]:
            capsys.readouterr()
            with structlog.testing.capture_logs():
                wiring = Wiring(raw.net.transport(CLIENT_HOST))
                code = await main_async(["admin", *argv, "-n", raw.namesrv_addr], wiring)
            out, err = capsys.readouterr()
            return code, out.strip(), err.strip()

        assert (await raw.add(f)).code == ResponseCode.SUCCESS  # fails every second
        before = container.version.counter
        update = ("updateBrokerConfig", "-b", CONTAINER, "-k")
        assert await admin(*update, "containerMaxRestarts", "-v", "1") == (
            0,
            f"update broker config success, {CONTAINER}",
            "",
        )
        assert "containerMaxRestarts=1\n" in conf.read_text()
        assert container.version.counter == before + 1
        code, out, _ = await admin("getBrokerConfig", "-b", CONTAINER)
        assert code == 0 and "containerMaxRestarts" in out
        assert (await raw.status())["containerMaxRestarts"] == "1"
        refusals = [
            ("brokerConfigPaths", "/tmp/x.conf", "Can not update config in black list."),
            ("configBlackList", "", "Can not update config in black list."),
            ("rocketmqHome", "/opt", "Can not update config in black list."),
            ("listenPort", "10999", "restart"),
            ("noSuchKey", "1", "noSuchKey"),
            ("containerRestartStableMillis", "-5", "containerRestartStableMillis"),
        ]
        for key, value, why in refusals:
            code, _, err = await admin(*update, key, "-v", value)
            assert code == 1 and why in err, (key, err)
        assert container.version.counter == before + 1
        assert (await raw.status())["listenPort"] == str(CONTAINER_PORT)
        # in effect for the member already running: given up after 1 restart, not 5
        await trio.sleep(30)
        assert len(starts) == 2
        assert [m.identity.broker_name for m in container.registry.members()] == ["broker-a"]
