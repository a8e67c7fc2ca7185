"""Live config and write permissions through `rocketrio admin`, in-process (cli.main.main_async)
against a NameServer and brokers (and a controller) on the simulated network with a MockClock:
a live key changes what the running server does, shows in the get command, is written into the
config file the server was started with and logged; a refused key changes nothing, neither in
the process nor in the file; wipeWritePerm / addWritePerm and brokerPermission move the sends
between broker sets; updateTopicPerm rewrites the topic on the brokers."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.client import config_admin as ca
from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.message import Message, SendStatus
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.controller import Controller
from rocketrio.actors.observe import events
from rocketrio.actors.raft.node import run_inline
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from rocketrio.protocol.bodies import PERM_READ, PERM_WRITE, MessageQueue
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.config import load_config
from tests.harness.clients import Cluster, cluster, create_topic
from tests.harness.sim_network import SimNetwork

Capture = pytest.CaptureFixture[str]
HOST = "10.0.9.200"
A_HOST, B_HOST = "10.0.1.1", "10.0.1.2"
BROKER_FILE = "# the operator's broker-a file\nbrokerName=broker-a\nmaxMessageSize=4194304\n"


async def run(capsys: Capture, net: SimNetwork, *argv: str) -> tuple[int, str, str, list[Any]]:
    """``rocketrio admin argv``: exit status, stdout, stderr and the servers' log events."""
    capsys.readouterr()
    with structlog.testing.capture_logs() as logs:
        code = await main_async(["admin", *argv], Wiring(net.transport(HOST)))
    out, err = capsys.readouterr()
    return code, out, err, logs


async def start_two(c: Cluster, tmp_path: Path) -> Path:
    """broker-a (started from tmp/broker-a.conf) and broker-b; topic T on both."""
    path = tmp_path / "broker-a.conf"
    path.write_text(BROKER_FILE)
    await c.start_broker("broker-a", A_HOST, brokerConfigPath=str(path))
    await c.start_broker("broker-b", B_HOST)
    await create_topic(c, "T", queues=4)
    return path


async def route_perms(c: Cluster, topic: str = "T") -> dict[str, int]:
    async with c.admin() as mq:
        route = await mq.topic_route(topic)
    return {qd.brokerName: qd.perm for qd in route.queueDatas}


async def wait_perm(c: Cluster, broker: str, perm: int) -> None:
    with trio.fail_after(30):
        while (await route_perms(c)).get(broker) != perm:
            await trio.sleep(0.1)


async def brokers_of_new_sends(c: Cluster, n: int = 16) -> set[str]:
    async with Producer("pg", c.ns_addr, rng=random.Random(5), **c.kwargs()) as p:
        results = [await p.send(Message("T", f"m{i}".encode())) for i in range(n)]
    return {r.message_queue.brokerName for r in results}


def on(broker: str) -> Any:
    def select(queues: list[MessageQueue], _msg: Message, _arg: Any) -> MessageQueue:
        return next(q for q in queues if q.brokerName == broker)

    return select


# --- updateBrokerConfig / getBrokerConfig ------------------------------------------------------


async def test_live_broker_key_takes_effect_shows_persists_and_is_logged(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ()) as c:
        path = await start_two(c, tmp_path)
        addr = c.addr("broker-a")
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            await p.send(Message("T", b"x" * 2048), on("broker-a"))  # fine before
            code, out, err, logs = await run(
                capsys, c.net, "updateBrokerConfig", "-n", c.ns_addr, "-b", addr,
                "-k", "maxMessageSize", "-v", "1024",
            )  # fmt: skip
            assert (code, err) == (0, ""), err
            assert out.strip() == f"update broker config success, {addr}"
            # the running broker refuses what it took a moment ago
            with pytest.raises(MQBrokerError) as e:
                await p.send(Message("T", b"x" * 2048), on("broker-a"))
            assert e.value.code == ResponseCode.MESSAGE_ILLEGAL
            await p.send(Message("T", b"x" * 1000), on("broker-a"))
            await p.send(Message("T", b"x" * 2048), on("broker-b"))  # the other one is untouched
        [event] = [e for e in logs if e["event"] == events.ConfigUpdated.NAME]
        assert event["key"] == "maxMessageSize" and event["new"] == "1024"
        assert event["old"] == "4194304" and event["persisted_to"] == str(path)
        # getBrokerConfig shows it (a table), --json too
        code, out, _, _ = await run(capsys, c.net, "getBrokerConfig", "-n", c.ns_addr, "-b", addr)
        assert code == 0 and f"============{addr}============" in out
        assert any(line.split() == ["maxMessageSize", "1024"] for line in out.splitlines())
        code, out, _, _ = await run(
            capsys, c.net, "getBrokerConfig", "-n", c.ns_addr, "-c", "DefaultCluster", "--json"
        )
        assert code == 0 and '"maxMessageSize": "1024"' in out  # broker-a
        assert '"maxMessageSize": "4194304"' in out  # broker-b
        # in the file the broker was started with, the operator's lines kept; a restart reads it
        assert path.read_text() == BROKER_FILE.replace("4194304", "1024")
        assert load_config(BrokerConfig, str(path)).maxMessageSize == 1024


async def test_raised_max_message_size_reaches_the_store_too(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ()) as c:
        await c.start_broker("broker-a", A_HOST, maxMessageSize=1024)
        await create_topic(c, "T", queues=2)
        async with Producer("pg", c.ns_addr, **c.kwargs(), retries=0) as p:
            with pytest.raises(MQClientError, match="MESSAGE_ILLEGAL"):
                await p.send(Message("T", b"x" * 2048))
            code, _, err, _ = await run(
                capsys, c.net, "updateBrokerConfig", "-n", c.ns_addr, "-b", c.addr("broker-a"),
                "-k", "maxMessageSize", "-v", "4096",
            )  # fmt: skip
            assert code == 0, err
            r = await p.send(Message("T", b"x" * 2048))  # the send check and the store's put
        assert r.send_status == SendStatus.SEND_OK


async def test_flush_interval_changes_the_running_flush_period(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ("broker-a",)) as c:
        store = c.brokers["broker-a"].store.actor

        async def flushes_in_10s() -> int:
            before = store.flusher.flush_count
            await trio.sleep(10)
            return store.flusher.flush_count - before

        assert await flushes_in_10s() >= 19  # flushIntervalCommitLog=500
        code, _, err, _ = await run(
            capsys, c.net, "updateBrokerConfig", "-n", c.ns_addr, "-b", c.addr("broker-a"),
            "-k", "flushIntervalCommitLog", "-v", "5000",
        )  # fmt: skip
        assert code == 0, err
        await trio.sleep(1)  # the flush already waiting its 500 ms
        assert await flushes_in_10s() <= 2


async def test_register_period_applies_at_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    """registerNameServerPeriod 30 s -> 2 s: the broker registers at once and then every 2 s,
    not first at the end of the 30 s period in progress."""
    async with cluster(tmp_path, ("broker-a",)) as c:
        reg = c.brokers["broker-a"].registration
        assert c.brokers["broker-a"].config.registerNameServerPeriod == 30_000
        done: list[float] = []
        plain = reg.register_all

        async def counted() -> None:
            await plain()
            done.append(trio.current_time())

        reg.register_all = counted  # type: ignore[method-assign]
        await trio.sleep(31)  # a periodic registration: the next one is 30 s away
        assert len(done) >= 1
        done.clear()
        code, _, err, _ = await run(
            capsys, c.net, "updateBrokerConfig", "-n", c.ns_addr, "-b", c.addr("broker-a"),
            "-k", "registerNameServerPeriod", "-v", "2000",
        )  # fmt: skip
        assert code == 0, err
        changed_at = trio.current_time()
        await trio.sleep(0.5)
        assert len(done) == 1 and done[0] - changed_at < 0.5  # at once
        await trio.sleep(10)
        assert 5 <= len(done) <= 7  # then every 2 s


async def test_refused_broker_keys_change_nothing(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ()) as c:
        path = await start_two(c, tmp_path)
        addr = c.addr("broker-a")
        broker = c.brokers["broker-a"]
        before = await _config(c, addr)
        cases = [
            ("listenPort", "10999", "listenPort needs a broker restart"),
            ("storePathRootDir", "/elsewhere", "storePathRootDir needs a broker restart"),
            ("maxmessagesize", "1", "unknown key maxmessagesize (did you mean maxMessageSize?)"),
            ("maxMessageSize", "big", "bad value for maxMessageSize='big'"),
            ("brokerPermission", "9", "brokerPermission must be a perm"),
            ("brokerConfigPath", "/tmp/x", "Can not update config in black list."),
            ("configBlackList", "", "Can not update config in black list."),
        ]
        for key, value, expected in cases:
            code, out, err, logs = await run(
                capsys, c.net, "updateBrokerConfig", "-n", c.ns_addr, "-b", addr,
                "-k", key, "-v", value,
            )  # fmt: skip
            assert code == 1 and out == "", (key, out)
            assert expected in err, (key, err)
            assert [e["event"] for e in logs if "config" in e["event"]] == [
                events.ConfigUpdateRefused.NAME
            ]
        # one request, a live key with a restart key: all or nothing
        async with c.admin() as mq:
            with pytest.raises(MQBrokerError) as e:
                await ca.update_broker_config(
                    mq, addr, {"maxMessageSize": "1024", "brokerName": "broker-z"}
                )
        assert e.value.code == ResponseCode.INVALID_PARAMETER
        assert "brokerName needs a broker restart" in e.value.remark
        assert broker.config.maxMessageSize == 4 * 1024 * 1024
        assert broker.send.processor.config.max_message_size == 4 * 1024 * 1024
        assert await _config(c, addr) == before
        assert path.read_text() == BROKER_FILE


async def _config(c: Cluster, addr: str) -> dict[str, str]:
    async with c.admin() as mq:
        return (await ca.get_broker_config(mq, ca.BrokerTarget(addr))).values


async def test_update_without_a_config_file_is_live_only_and_says_so(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ("broker-a",)) as c:
        addr = c.addr("broker-a")
        code, out, err, _ = await run(
            capsys, c.net, "updateBrokerConfig", "-n", c.ns_addr, "-c", "DefaultCluster",
            "-k", "autoCreateTopicEnable", "-v", "false",
        )  # fmt: skip
        assert code == 0, err
        assert f"update broker config success, {addr} (applied to the running broker only" in out
        # auto-creation stops: a send to a new topic is refused, TBW102 no longer inherits
        async with Producer("pg", c.ns_addr, **c.kwargs(), retries=0) as p:
            with pytest.raises(MQClientError, match=r"TOPIC_NOT_EXIST .*autoCreateTopicEnable=f"):
                await p.send(Message("NewTopic", b"x"))
        assert c.brokers["broker-a"].tables.topics.select("TBW102").perm == PERM_READ | PERM_WRITE
        code, _, err, _ = await run(
            capsys, c.net, "updateBrokerConfig", "-n", c.ns_addr, "-b", addr,
            "-k", "autoCreateTopicEnable", "-v", "true",
        )  # fmt: skip
        assert code == 0, err
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            r = await p.send(Message("NewTopic2", b"x"))
        assert r.message_queue.topic == "NewTopic2"


# --- brokerPermission, wipeWritePerm, addWritePerm ----------------------------------------------


async def test_broker_permission_read_only_reregisters_and_sends_move_to_the_other_set(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ()) as c:
        path = await start_two(c, tmp_path)
        addr = c.addr("broker-a")
        assert await brokers_of_new_sends(c) == {"broker-a", "broker-b"}
        async with Producer("pg", c.ns_addr, **c.kwargs()) as stale:
            await stale.send(Message("T", b"warm"))  # holds the route from before
            code, _, err, _ = await run(
                capsys, c.net, "updateBrokerConfig", "-n", c.ns_addr, "-b", addr,
                "-k", "brokerPermission", "-v", "4",
            )  # fmt: skip
            assert code == 0, err
            with pytest.raises(MQBrokerError) as e:
                await stale.send(Message("T", b"to a"), on("broker-a"))
            assert e.value.code == ResponseCode.NO_PERMISSION
            assert "sending message is forbidden" in e.value.remark
        # re-registered at once: the route shows broker-a read-only, sends go to broker-b
        await wait_perm(c, "broker-a", PERM_READ)
        assert (await route_perms(c))["broker-b"] == PERM_READ | PERM_WRITE
        assert await brokers_of_new_sends(c) == {"broker-b"}
        assert "brokerPermission=4" in path.read_text()
        code, _, err, _ = await run(
            capsys, c.net, "updateBrokerConfig", "-n", c.ns_addr, "-b", addr,
            "-k", "brokerPermission", "-v", "6",
        )  # fmt: skip
        assert code == 0, err
        await wait_perm(c, "broker-a", PERM_READ | PERM_WRITE)
        assert await brokers_of_new_sends(c) == {"broker-a", "broker-b"}


async def test_wipe_and_add_write_perm(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ()) as c:
        await start_two(c, tmp_path)
        ns = c.ns_addr
        code, out, err, _ = await run(capsys, c.net, "wipeWritePerm", "-n", ns, "-b", "broker-a")
        assert code == 0, err
        line = out.strip()
        prefix = f"wipe write perm of broker[broker-a] in name server[{ns}] OK, "
        assert line.startswith(prefix) and int(line.removeprefix(prefix)) >= 1
        assert (await route_perms(c))["broker-a"] == PERM_READ
        assert await brokers_of_new_sends(c) == {"broker-b"}
        # the broker's periodic registration (same DataVersion) does not give W back
        await trio.sleep(c.brokers["broker-a"].config.registerNameServerPeriod / 1000 * 2.5)
        assert (await route_perms(c))["broker-a"] == PERM_READ
        code, out, err, _ = await run(capsys, c.net, "addWritePerm", "-n", ns, "-b", "broker-a")
        assert code == 0, err
        assert out.startswith(f"add write perm of broker[broker-a] in name server[{ns}] OK, ")
        assert (await route_perms(c))["broker-a"] == PERM_READ | PERM_WRITE
        assert await brokers_of_new_sends(c) == {"broker-a", "broker-b"}


async def test_update_topic_perm_on_a_cluster_and_on_one_broker(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ()) as c:
        await start_two(c, tmp_path)
        a, b = c.addr("broker-a"), c.addr("broker-b")
        argv = ["updateTopicPerm", "-n", c.ns_addr, "-t", "T", "-p", "4"]
        code, out, err, _ = await run(capsys, c.net, *argv, "-c", "DefaultCluster")
        assert code == 0, err
        assert out.splitlines() == [
            f"update topic perm from 6 (RW-) to 4 (R--) in {a} success.",
            f"update topic perm from 6 (RW-) to 4 (R--) in {b} success.",
        ]
        for key in ("broker-a", "broker-b"):
            tc = c.brokers[key].tables.topics.select("T")
            assert (tc.perm, tc.readQueueNums, tc.writeQueueNums) == (4, 4, 4)
        await wait_perm(c, "broker-a", PERM_READ)
        await wait_perm(c, "broker-b", PERM_READ)
        async with Producer("pg", c.ns_addr, **c.kwargs(), retries=0) as p:
            with pytest.raises(Exception, match="T"):
                await p.send(Message("T", b"x"))
        code, out, _, _ = await run(capsys, c.net, *argv, "-b", a)
        assert code == 0 and out.strip() == f"new perm equals to the old one! (T on {a})"
        code, out, _, _ = await run(capsys, c.net, *argv[:-1], "6", "-b", a)
        assert code == 0 and "from 4 (R--) to 6 (RW-)" in out
        await wait_perm(c, "broker-a", PERM_READ | PERM_WRITE)
        assert await brokers_of_new_sends(c) == {"broker-a"}


# --- NameServer ---------------------------------------------------------------------------------


async def test_namesrv_config_live_key_refusals_and_file(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ("broker-a",)) as c:
        assert c.namesrv is not None
        path = tmp_path / "namesrv.conf"
        path.write_text("# name server\nlistenPort=9876\n")
        c.namesrv.config.configStorePath = str(path)  # what `rocketrio namesrv -c` sets
        ns = c.ns_addr
        code, out, _, _ = await run(capsys, c.net, "getNamesrvConfig", "-n", ns)
        assert code == 0 and any(
            line.split() == ["enableAllTopicList", "true"] for line in out.splitlines()
        )
        async with c.admin() as mq:
            assert "broker-a" in await mq.topic_list()  # answers while enabled
        code, out, err, logs = await run(
            capsys, c.net, "updateNamesrvConfig", "-n", ns,
            "-k", "enableAllTopicList", "-v", "false",
        )  # fmt: skip
        assert code == 0, err
        assert out.strip() == f"update name server config success! {ns}: enableAllTopicList : false"
        assert [e["key"] for e in logs if e["event"] == events.ConfigUpdated.NAME] == [
            "enableAllTopicList"
        ]
        async with c.admin() as mq:
            with pytest.raises(MQBrokerError, match="disable"):
                await mq.topic_list()
        assert path.read_text() == "# name server\nlistenPort=9876\nenableAllTopicList=false\n"
        for key, value, expected in (
            ("listenPort", "9999", "listenPort needs a name server restart"),
            ("kvConfigPath", "/x", "Can not update config in black list."),
            ("enableTopicList", "maybe", "bad value for enableTopicList='maybe'"),
        ):
            code, _, err, _ = await run(
                capsys, c.net, "updateNamesrvConfig", "-n", ns, "-k", key, "-v", value
            )
            assert code == 1 and expected in err, (key, err)
        assert c.namesrv.config.listenPort == 9876 and c.namesrv.config.enableTopicList
        assert path.read_text() == "# name server\nlistenPort=9876\nenableAllTopicList=false\n"


async def test_namesrv_route_table_hears_a_live_key(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ("broker-a",)) as c:
        assert c.namesrv is not None
        code, _, err, _ = await run(
            capsys, c.net, "updateNamesrvConfig", "-n", c.ns_addr,
            "-k", "brokerChannelExpiredTime", "-v", "60000",
        )  # fmt: skip
        assert code == 0, err
        assert c.namesrv.routes.default_timeout_ms == 60_000


# --- controller ----------------------------------------------------------------------------------

CTRL_HOST = "10.0.0.1"
CTRL_ADDR = f"{CTRL_HOST}:9878"
ROOT = ["--access-key", "root", "--secret-key", "root-secret"]


async def test_controller_config_needs_a_super_user_and_changes_this_replica(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    net = SimNetwork(11)
    path = tmp_path / "controller.conf"
    path.write_text("controllerDLegerSelfId=n0\n")
    cfg = ControllerConfig(
        controllerDLegerGroup="g",
        controllerDLegerPeers=f"n0-{CTRL_ADDR}",
        controllerDLegerSelfId="n0",
        controllerStorePath=str(tmp_path / "ctrl"),
        configStorePath=str(path),
        authenticationEnabled=True,
        initAuthenticationUser='{"username":"root","password":"root-secret"}',
    )
    ctrl = Controller(cfg, net.transport(CTRL_HOST), io_runner=run_inline)
    async with trio.open_nursery() as n:
        await n.start(ctrl.run)
        code, out, err, _ = await run(capsys, net, "getControllerConfig", "-a", CTRL_ADDR)
        assert code == 0, err
        assert out.startswith(f"============{CTRL_ADDR}============")
        rows = [line.split() for line in out.splitlines()]
        assert ["enableElectUncleanMaster", "false"] in rows
        update = ["updateControllerConfig", "-a", CTRL_ADDR, "-k", "enableElectUncleanMaster"]
        code, _, err, _ = await run(capsys, net, *update, "-v", "true")
        assert code == 1 and "NO_PERMISSION" in err, err
        assert not ctrl.replicas.enable_elect_unclean_master
        code, out, err, logs = await run(capsys, net, *update, "-v", "true", *ROOT)
        assert code == 0, err
        assert out.strip() == (
            f"update controller config success! {CTRL_ADDR}: enableElectUncleanMaster : true"
        )
        # the elections this replica computes read the replicas table's switch
        assert ctrl.replicas.enable_elect_unclean_master
        assert path.read_text() == "controllerDLegerSelfId=n0\nenableElectUncleanMaster=true\n"
        assert any(e["event"] == events.ConfigUpdated.NAME for e in logs)
        code, _, err, _ = await run(
            capsys, net, "updateControllerConfig", "-a", CTRL_ADDR,
            "-k", "controllerDLegerPeers", "-v", "n0-10.0.0.9:9878", *ROOT,
        )  # fmt: skip
        assert code == 1 and "controllerDLegerPeers needs a controller restart" in err
        assert ctrl.config.controllerDLegerPeers == f"n0-{CTRL_ADDR}"
        n.cancel_scope.cancel()
