"""`rocketrio admin` run in-process (cli.main.main_async) against a controller, a NameServer and
a controller-mode broker on the simulated network (MockClock): every subcommand asked about
something unknown says so in one line and exits 1; the human tables print dates; ``--json``
keeps epoch milliseconds."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.cli import admin as cli_admin
from rocketrio.protocol.message import offset_msg_id
from tests.harness.admin_cli import HOST, ISO_DATE, Capture, admin, start_broker_node
from tests.harness.clock import EPOCH_MS
from tests.harness.replication import cluster

NOBODY = "10.0.7.7:10911"  # an address where nothing listens


def unknown_cases(ns: str, ctrl: str) -> list[tuple[list[str], str]]:
    """(argv, what the one-line error must name) for each subcommand asked about an unknown."""
    return [
        (["updateTopic", "-n", ns, "-t", "T2", "-c", "NoCluster"], "cluster NoCluster is unknown"),
        (["updateTopic", "-n", ns, "-t", "T2", "-b", NOBODY], f"cannot connect to {NOBODY}"),
        (["deleteTopic", "-n", ns, "-t", "NoTopic"], "no route for topic NoTopic"),
        (["deleteTopic", "-n", ns, "-t", "T", "-c", "NoCluster"], "cluster NoCluster is unknown"),
        (["topicRoute", "-n", ns, "-t", "NoTopic"], "no route for topic NoTopic"),
        (["topicStatus", "-n", ns, "-t", "NoTopic"], "no route for topic NoTopic"),
        (["clusterList", "-n", ns, "-c", "NoCluster"], "cluster NoCluster is unknown"),
        (["brokerStatus", "-n", ns, "-b", NOBODY], f"{NOBODY} is not a broker registered"),
        (["brokerStatus", "-n", ns, "-c", "NoCluster"], "cluster NoCluster is unknown"),
        (["statsAll", "-n", ns, "-t", "NoTopic"], "topic NoTopic is unknown"),
        (["consumerProgress", "-n", ns, "-g", "NoGroup"], "consumer group NoGroup is unknown"),
        (["consumerProgress", "-n", ns, "-g", "NoGroup", "-t", "T"], "group NoGroup is unknown"),
        (["consumerProgress", "-n", ns, "-g", "G", "-t", "NoTopic"], "no route for topic NoTopic"),
        (["popProgress", "-n", ns, "-g", "NoGroup"], "consumer group NoGroup is unknown"),
        (
            ["setConsumeMode", "-n", ns, "-b", NOBODY, "-t", "T", "-g", "G", "-m", "POP"],
            f"cannot connect to {NOBODY}",
        ),
        (["getConsumeMode", "-n", ns, "-c", "NoCluster"], "cluster NoCluster is unknown"),
        (["cleanUnusedTopic", "-n", ns, "-b", NOBODY], f"cannot connect to {NOBODY}"),
        (["cleanUnusedTopic", "-n", ns, "-c", "NoCluster"], "cluster NoCluster is unknown"),
        (
            [
                "resumeCheckHalfMessage",
                "-n",
                ns,
                "-i",
                offset_msg_id(bytes([10, 0, 7, 7]), 10911, 0),
            ],
            f"cannot connect to {NOBODY}",
        ),
        (
            ["updateAndGetGroupReadForbidden", "-n", ns, "-b", NOBODY, "-g", "G", "-t", "T"],
            f"cannot connect to {NOBODY}",
        ),
        (
            ["queryCq", "-n", ns, "-t", "NoTopic", "-q", "0", "-i", "0"],
            "no route for topic NoTopic",
        ),
        (["getConsumerStatus", "-n", ns, "-g", "G", "-t", "NoTopic"], "no route for topic NoTopic"),
        (["getControllerMetaData", "-a", "10.0.7.8:9878"], "cannot connect to 10.0.7.8:9878"),
        (["getSyncStateSet", "-a", ctrl, "-b", "NoSet"], "NoSet unknown to the controller"),
        (
            ["getSyncStateSet", "-n", ns, "-a", ctrl, "-c", "NoCluster"],
            "cluster NoCluster is unknown",
        ),
        (
            ["electMaster", "-a", ctrl, "-c", "DefaultCluster", "-bn", "NoSet", "-b", "1"],
            "broker set NoSet has not been registered",
        ),
        (["cleanBrokerMetadata", "-a", ctrl, "-bn", "NoSet"], "broker set NoSet does not exist"),
        (["getBrokerEpoch", "-n", ns, "-bn", "NoSet"], "broker NoSet is not registered"),
        (["getBrokerEpoch", "-n", ns, "-c", "NoCluster"], "cluster NoCluster is unknown"),
        (["getBrokerEpoch", "-n", ns, "-b", NOBODY], f"cannot connect to {NOBODY}"),
        (["queryMsgById", "-n", ns, "-i", "NoSuchId"], "NoSuchId is not an offset message id"),
        (["queryMsgById", "-n", ns, "-i", "AB12", "-t", "T"], "no message with id AB12 in topic T"),
        (["queryMsgByKey", "-n", ns, "-t", "T", "-k", "NoKey"], "no message with key NoKey"),
        (["queryMsgByKey", "-n", ns, "-t", "NoTopic", "-k", "k"], "no route for topic NoTopic"),
        # message commands (cli/admin_msgs.py; bad brokers, queues, offsets: test_cli_admin_msgs)
        (["queryMsgByUniqueKey", "-n", ns, "-t", "NoTopic", "-i", "AB12"], "no route for topic"),
        (
            ["queryMsgByOffset", "-n", ns, "-t", "T", "-b", "NoSet", "-i", "0", "-o", "0"],
            "broker NoSet does not serve topic T",
        ),
        (["printMsg", "-n", ns, "-t", "NoTopic"], "no route for topic NoTopic"),
        (["consumeMessage", "-n", ns, "-t", "NoTopic"], "no route for topic NoTopic"),
        (["sendMessage", "-n", ns, "-t", "NoTopic", "-p", "x"], "no route for topic NoTopic"),
        # groups, connections, topic lists (cli/admin_groups.py)
        (["consumerConnection", "-n", ns, "-g", "NoGroup"], "consumer group[NoGroup] not online"),
        (["consumerStatus", "-n", ns, "-g", "NoGroup"], "consumer group[NoGroup] not online"),
        (["consumerStatus", "-n", ns, "-g", "NoGroup", "-i", "x@y"], "<NoGroup> <x@y> not online"),
        (
            ["producerConnection", "-n", ns, "-g", "NoGroup", "-t", "T"],
            "producer group NoGroup has no producer online for topic T",
        ),
        (["brokerConsumeStats", "-n", ns, "-b", NOBODY], f"cannot connect to {NOBODY}"),
        (["producer", "-n", ns, "-b", NOBODY], f"cannot connect to {NOBODY}"),
        (["updateSubGroup", "-n", ns, "-c", "NoCluster", "-g", "G"], "cluster NoCluster is unk"),
        (["deleteSubGroup", "-n", ns, "-c", "NoCluster", "-g", "G"], "cluster NoCluster is unk"),
        (["topicList", "-n", "10.0.7.8:9876"], "cannot connect to 10.0.7.8:9876"),
        (["topicClusterList", "-n", ns, "-t", "NoTopic"], "no route for topic NoTopic"),
        # configs and perms (cli/admin_config.py)
        (["getBrokerConfig", "-n", ns, "-c", "NoCluster"], "cluster NoCluster is unknown"),
        (["getBrokerConfig", "-n", ns, "-b", NOBODY], f"cannot connect to {NOBODY}"),
        (
            ["updateBrokerConfig", "-n", ns, "-c", "NoCluster", "-k", "maxMessageSize", "-v", "1"],
            "cluster NoCluster is unknown",
        ),
        (["deleteExpiredCommitLog", "-n", ns, "-c", "NoCluster"], "cluster NoCluster is unknown"),
        (["deleteExpiredCommitLog", "-n", ns, "-b", NOBODY], f"cannot connect to {NOBODY}"),
        (["getNamesrvConfig", "-n", NOBODY], f"cannot connect to {NOBODY}"),
        (
            ["updateNamesrvConfig", "-n", NOBODY, "-k", "k", "-v", "v"],
            f"cannot connect to {NOBODY}",
        ),
        (["wipeWritePerm", "-n", ns, "-b", "NoSet"], "broker NoSet is not registered"),
        (["addWritePerm", "-n", ns, "-b", "NoSet"], "broker NoSet is not registered"),
        (
            ["updateTopicPerm", "-n", ns, "-t", "NoTopic", "-c", "DefaultCluster", "-p", "4"],
            "No topic in this broker. topic: NoTopic",
        ),
        (["getControllerConfig", "-a", "10.0.7.8:9878"], "cannot connect to 10.0.7.8:9878"),
        (
            ["updateControllerConfig", "-a", "10.0.7.8:9878", "-k", "k", "-v", "v"],
            "cannot connect to 10.0.7.8:9878",
        ),
        # replication status (cli/admin_ha.py)
        (["haStatus", "-n", ns, "-b", NOBODY], f"cannot connect to {NOBODY}"),
        (["haStatus", "-n", ns, "-c", "NoCluster"], "cluster NoCluster is unknown"),
        # offsets (cli/admin_offsets.py)
        (["resetOffsetByTime", "-n", ns, "-g", "G", "-t", "NoTopic", "-s", "0"], "NoTopic"),
        (["skipAccumulatedMessage", "-n", ns, "-g", "G", "-t", "NoTopic"], "NoTopic"),
        (["cloneGroupOffset", "-n", ns, "-s", "G", "-d", "H", "-t", "NoTopic"], "NoTopic"),
        # static topics (cli/admin_static.py)
        (
            ["updateStaticTopic", "-n", ns, "-t", "S", "-qn", "4", "-c", "NoCluster"],
            "cluster NoCluster is unknown",
        ),
        (
            ["updateStaticTopic", "-n", ns, "-t", "S", "-qn", "4", "-b", "NoSet"],
            "brokers ['NoSet'] have no live master",
        ),
        (
            ["remappingStaticTopic", "-n", ns, "-t", "S", "-c", "NoCluster"],
            "cluster NoCluster is unknown",
        ),
        (
            ["remappingStaticTopic", "-n", ns, "-t", "NoTopic", "-c", "DefaultCluster"],
            "NoTopic",
        ),
        (
            ["remappingStaticTopic", "-n", ns, "-t", "S", "-mf", "/nonexistent/S.after"],
            "cannot read the mapping file /nonexistent/S.after",
        ),
        # ACL 2.0 (cli/admin_auth.py)
        *[
            ([cmd, "-n", ns, "-c", "NoCluster", *args], "cluster NoCluster is unknown")
            for cmd, args in (
                ("createUser", ["-u", "u", "-p", "p"]),
                ("updateUser", ["-u", "u", "-p", "p"]),
                ("deleteUser", ["-u", "u"]),
                ("listUser", []),
                ("createAcl", ["-s", "User:u", "-r", "Topic:T", "-a", "Pub"]),
                ("updateAcl", ["-s", "User:u", "-r", "Topic:T", "-a", "Pub"]),
                ("deleteAcl", ["-s", "User:u"]),
                ("listAcl", []),
            )
        ],
        (["getUser", "-n", ns, "-c", "DefaultCluster", "-u", "nobody"], "user nobody not found"),
        (["addBroker", "-c", NOBODY, "-b", "/no/such.conf"], f"cannot connect to {NOBODY}"),
        (
            ["removeBroker", "-c", NOBODY, "-b", "DefaultCluster:broker-x:0"],
            f"cannot connect to {NOBODY}",
        ),
        (
            ["getAcl", "-n", ns, "-c", "DefaultCluster", "-s", "User:nobody"],
            "The subject User:nobody is not exist",
        ),
    ]


async def test_every_admin_command_names_what_is_unknown_and_exits_1(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 21) as c:
        await start_broker_node(c)
        async with MQAdmin(c.namesrv_addr, c.net.transport(HOST)) as mq:
            await mq.update_topic("T", cluster="DefaultCluster", read_queues=2, write_queues=2)
            await wait_for_route(mq, "T")
        cases = unknown_cases(c.namesrv_addr, c.controller_addr)
        covered = {argv[0] for argv, _ in cases}
        missing = set(cli_admin._COMMANDS) - covered
        assert not missing, f"add an unknown-target row for {sorted(missing)}"
        for argv, expected in cases:
            code, out, err = await admin(capsys, c, *argv)
            lines = err.strip().splitlines()
            assert code == 1, (argv, code, out, err)
            assert len(lines) == 1, (argv, err)
            assert lines[0].startswith(f"rocketrio admin {argv[0]}: "), (argv, err)
            assert expected in lines[0], (argv, err)
            assert "Traceback" not in err and "Error:" not in lines[0].split(": ", 1)[0]
        # the same queries about things that exist succeed (the rows above are not all-fail)
        for argv in (
            ["topicRoute", "-n", c.namesrv_addr, "-t", "T"],
            ["clusterList", "-n", c.namesrv_addr, "-c", "DefaultCluster"],
            ["getSyncStateSet", "-a", c.controller_addr, "-b", "broker-a"],
            ["getBrokerEpoch", "-n", c.namesrv_addr, "-bn", "broker-a"],
        ):
            code, out, err = await admin(capsys, c, *argv)
            assert code == 0 and err == "", (argv, err)


async def test_partly_unknown_sync_state_set_prints_the_known_part_and_exits_1(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 22) as c:
        await start_broker_node(c)
        code, out, err = await admin(
            capsys, c, "getSyncStateSet", "-a", c.controller_addr, "-b", "broker-a;NoSet"
        )
        assert code == 1
        assert "broker-a: master brokerId 1" in out
        assert err.strip() == (
            "rocketrio admin getSyncStateSet: broker set(s) NoSet unknown to the controller"
        )


@pytest.fixture
def kolkata_time(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Local time UTC+05:30, so a date printed in local time shows that offset."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def test_tables_print_local_dates_and_json_keeps_epoch_ms(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture, kolkata_time: Any
) -> None:
    async with cluster(tmp_path, 23) as c:
        await start_broker_node(c)
        ns = c.namesrv_addr
        async with MQAdmin(ns, c.net.transport(HOST)) as mq:
            await mq.update_topic("T", cluster="DefaultCluster", read_queues=1, write_queues=1)
            await wait_for_route(mq, "T")
        kw: dict[str, Any] = {
            "transport": c.net.transport("10.0.9.8"),
            "client_config": ClientConfig(clientIP="10.0.9.8", instanceName="p"),
        }
        async with Producer("pg", ns, **kw) as p:
            for i in range(3):
                await p.send(Message("T", f"m{i}".encode(), keys=f"k{i}"))
        got: list[Any] = []

        def listener(msgs: list[Any]) -> ConsumeStatus:
            got.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        kw["transport"] = c.net.transport("10.0.9.9")
        kw["client_config"] = ClientConfig(clientIP="10.0.9.9", instanceName="c")
        consumer = PushConsumer("G", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **kw)
        consumer.subscribe("T")
        consumer.register_listener(listener)
        async with consumer:
            with trio.fail_after(60):
                while len(got) < 2:
                    await trio.sleep(0.1)
            await trio.sleep(6)  # offsets persisted

        stamp = f"{ISO_DATE}"
        code, out, _ = await admin(capsys, c, "topicStatus", "-n", ns, "-t", "T")
        assert code == 0 and re.search(rf"\s{stamp}$", out, re.M), out
        assert "+05:30" in out and str(EPOCH_MS)[:6] not in out

        code, out, _ = await admin(capsys, c, "consumerProgress", "-n", ns, "-g", "G")
        assert code == 0 and "last time" in out and "+05:30" in out, out

        code, out, _ = await admin(capsys, c, "brokerStatus", "-n", ns, "-b", "10.0.2.1:10911")
        boot = re.search(r"^bootTimestamp\s+: (\S+)$", out, re.M)
        assert code == 0 and boot and re.fullmatch(stamp, boot.group(1)), out
        assert boot.group(1).endswith("+05:30")

        code, out, _ = await admin(capsys, c, "queryMsgByKey", "-n", ns, "-t", "T", "-k", "k1")
        born = re.search(r"^born\s+: (\S+) at ", out, re.M)
        stored = re.search(r"^stored\s+: (\S+) at ", out, re.M)
        assert code == 0 and born and stored, out
        assert re.fullmatch(stamp, born.group(1)) and re.fullmatch(stamp, stored.group(1))

        # --json stays machine-readable: epoch milliseconds, untouched
        code, out, _ = await admin(capsys, c, "topicStatus", "-n", ns, "-t", "T", "--json")
        rows = json.loads(out)
        assert code == 0 and rows[0]["lastUpdateTimestamp"] >= EPOCH_MS
        code, out, _ = await admin(
            capsys, c, "queryMsgByKey", "-n", ns, "-t", "T", "-k", "k1", "--json"
        )
        assert json.loads(out)[0]["store_timestamp"] >= EPOCH_MS


async def test_update_and_get_group_read_forbidden(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 24) as c:
        await start_broker_node(c)
        ns, broker = c.namesrv_addr, "10.0.2.1:10911"
        base = ["updateAndGetGroupReadForbidden", "-n", ns, "-g", "G", "-t", "T"]
        code, out, err = await admin(capsys, c, *base, "-c", "DefaultCluster", "-r", "false")
        assert (code, err) == (0, ""), err
        assert out.strip() == f"{broker}: group[G] topic[T] readable[false]"
        code, out, _ = await admin(capsys, c, *base, "-b", broker)  # no -r: only read
        assert code == 0 and out.strip().endswith("readable[false]"), out
        code, out, _ = await admin(capsys, c, *base, "-b", broker, "-r", "TRUE")
        assert code == 0 and out.strip().endswith("readable[true]"), out
        with pytest.raises(SystemExit):  # argparse's usage error
            await admin(capsys, c, *base, "-b", broker, "-r", "maybe")
        assert "readable must be true or false" in capsys.readouterr().err
