"""`rocketrio admin` message commands (cli/admin_msgs.py) in-process against a NameServer, a
controller and a broker on the simulated network (MockClock): queryMsgById,
queryMsgByUniqueKey and queryMsgByOffset print mqadmin's message fields and each consumer
group's track (a consumed message, one a live consumer has not finished, a group gone
offline); printMsg and consumeMessage read queues by offset and time; sendMessage sends to a
chosen queue; every bad input is one line and exit 1 (2 for usage)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import trio
import trio.testing

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt
from tests.harness.admin_cli import (
    HOST,
    ISO_DATE,
    Capture,
    admin,
    client_kwargs,
    make_topic,
    start_broker_node,
)
from tests.harness.replication import cluster

BROKER = "broker-a"


def _tracks(out: str) -> dict[str, str]:
    """group -> track type from the printed #Consumer Group table."""
    rows = re.findall(r"^(G\w*)\s+([A-Z_]+)\b", out, re.M)
    return dict(rows)


async def test_queries_print_the_message_and_each_groups_track(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 41) as c:
        await start_broker_node(c)
        ns = c.namesrv_addr
        await make_topic(c, "T", 1)
        async with Producer("PG", ns, **client_kwargs(c, "10.0.9.8", "p")) as p:
            sent = [
                await p.send(Message("T", f"m{i}".encode(), tags="TagA", keys=f"k{i}"))
                for i in range(2)
            ]
            # G2 consumes both and goes away: its offsets stay, its members do not
            got2: list[MessageExt] = []

            def listener2(msgs: list[MessageExt]) -> ConsumeStatus:
                got2.extend(msgs)
                return ConsumeStatus.CONSUME_SUCCESS

            g2 = PushConsumer(
                "G2", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                **client_kwargs(c, "10.0.9.6", "c2"),
            )  # fmt: skip
            g2.subscribe("T")
            g2.register_listener(listener2)
            async with g2:
                with trio.fail_after(60):
                    while len(got2) < 2:
                        await trio.sleep(0.1)
                await trio.sleep(6)  # offsets persisted
            # G consumes m0 and m1 and holds "hold" (offset 2) until released
            release = trio.Event()
            got: list[str] = []

            async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
                for m in msgs:
                    if m.body == b"hold":
                        await release.wait()
                    got.append(m.body.decode(errors="replace"))
                return ConsumeStatus.CONSUME_SUCCESS

            g = PushConsumer(
                "G", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                **client_kwargs(c, "10.0.9.9", "c"),
            )  # fmt: skip
            g.subscribe("T")
            g.register_listener(listener)
            async with g:
                held = await p.send(Message("T", b"hold", tags="TagA", keys="kh"))
                binary = await p.send(Message("T", b"\x00\xff\x1b[2J", keys="kb"))
                with trio.fail_after(60):
                    while not {"m0", "m1"} <= set(got):
                        await trio.sleep(0.1)
                await trio.sleep(6)  # G's offset (2) committed
                base = ["-n", ns, "-t", "T"]

                code, out, err = await admin(
                    capsys, c, "queryMsgByOffset", *base, "-b", BROKER, "-i", "0", "-o", "0"
                )
                assert code == 0, err
                assert re.search(r"^Topic:\s+T$", out, re.M) and "[TagA]" in out
                assert re.search(r"^Keys:\s+\[k0\]$", out, re.M), out
                assert re.search(r"^Queue Offset:\s+0$", out, re.M)
                assert re.search(rf"^Store Timestamp:\s+{ISO_DATE}$", out, re.M), out
                assert re.search(r"^Message Body:\s+m0$", out, re.M), out
                assert f"MsgId:               {sent[0].msg_id}" in out
                assert _tracks(out) == {"G": "CONSUMED", "G2": "NOT_ONLINE"}, out

                code, out, err = await admin(
                    capsys, c, "queryMsgByOffset", *base, "-b", BROKER, "-i", "0", "-o", "2"
                )
                assert code == 0 and re.search(r"^Message Body:\s+hold$", out, re.M), err
                assert _tracks(out) == {"G": "NOT_CONSUME_YET", "G2": "NOT_ONLINE"}, out

                # by the client's id (UNIQ_KEY) and by the broker's offset id: the same message
                code, out, err = await admin(
                    capsys, c, "queryMsgByUniqueKey", *base, "-i", held.msg_id
                )
                assert code == 0 and re.search(r"^Queue Offset:\s+2$", out, re.M), err
                assert _tracks(out)["G"] == "NOT_CONSUME_YET"
                code, out, err = await admin(
                    capsys, c, "queryMsgById", "-n", ns, "-i", sent[1].offset_msg_id
                )
                assert code == 0 and re.search(r"^Message Body:\s+m1$", out, re.M), err
                assert _tracks(out)["G"] == "CONSUMED"

                # a binary body is base64, never raw bytes on the terminal
                code, out, err = await admin(
                    capsys, c, "queryMsgById", "-n", ns, "-i", binary.offset_msg_id
                )
                assert code == 0 and "\x1b" not in out and "\x00" not in out, err
                assert "(6 bytes, not text) base64:AP8bWzJK" in out, out

                # --json: the same message and tracks, epoch-ms times
                code, out, _ = await admin(
                    capsys, c, "queryMsgByOffset", *base, "-b", BROKER, "-i", "0", "-o", "2",
                    "--json",
                )  # fmt: skip
                view = json.loads(out)[0]
                assert view["message"]["queueOffset"] == 2 and view["message"]["body"] == "hold"
                assert isinstance(view["message"]["storeTimestamp"], int)
                tracks = {t["consumerGroup"]: t["trackType"] for t in view["tracks"]}
                assert tracks == {"G": "NOT_CONSUME_YET", "G2": "NOT_ONLINE"}
                release.set()


async def test_print_consume_and_send_messages(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 42) as c:
        await start_broker_node(c)
        ns = c.namesrv_addr
        await make_topic(c, "T", 2)
        async with Producer("PG", ns, **client_kwargs(c, "10.0.9.8", "p")) as p:
            for i in range(6):
                q = MessageQueue("T", BROKER, i % 2)
                tag = "TagA" if i % 3 else "TagB"
                await p.send_to_queue(Message("T", f"m{i}".encode(), tags=tag), q)
                await trio.sleep(1)
        async with MQAdmin(ns, c.net.transport(HOST)) as mq:
            status = await mq.topic_status("T")
            assert [(s.queueId, s.maxOffset) for s in status] == [(0, 3), (1, 3)]
        base = ["-n", ns, "-t", "T"]

        # printMsg: every queue, every message, with its body
        code, out, err = await admin(capsys, c, "printMsg", *base)
        assert code == 0, err
        bodies = re.findall(r"BODY: (m\d)$", out, re.M)
        assert sorted(bodies) == [f"m{i}" for i in range(6)], out
        assert out.count("minOffset=0, maxOffset=3, MessageQueue [topic=T") == 2
        assert "6 message(s)" in out
        # -s filters by tag on the broker; -d false leaves the bodies out
        code, out, err = await admin(capsys, c, "printMsg", *base, "-s", "TagB", "-d", "false")
        assert code == 0 and out.count("BODY: NOT PRINT BODY") == 2, out
        # -b / -e: from the first message stored at or after begin to the end offset
        code, out, _ = await admin(capsys, c, "printMsg", *base, "--json")
        views = [m for r in json.loads(out) for m in r["messages"]]
        stamps = sorted(m["storeTimestamp"] for m in views)
        code, out, err = await admin(
            capsys, c, "printMsg", *base, "-b", str(stamps[2]), "-e", str(stamps[5])
        )
        assert code == 0, err
        assert sorted(re.findall(r"BODY: (m\d)$", out, re.M)) == ["m2", "m3", "m4"], out

        # consumeMessage: -c caps the count over the queues; -b -i -o one queue from an offset
        code, out, err = await admin(capsys, c, "consumeMessage", *base, "-c", "4")
        assert code == 0 and "4 message(s)" in out, (out, err)
        code, out, err = await admin(
            capsys, c, "consumeMessage", *base, "-b", BROKER, "-i", "1", "-o", "1", "-g", "GC"
        )
        assert code == 0, err
        assert re.findall(r"BODY: (m\d)$", out, re.M) == ["m3", "m5"], out

        # sendMessage -b -i: lands on that queue, printed as mqadmin's result line
        code, out, err = await admin(
            capsys, c, "sendMessage", *base, "-p", "hello", "-k", "kk", "-c", "TagS",
            "-b", BROKER, "-i", "1",
        )  # fmt: skip
        assert code == 0, err
        header, line = out.splitlines()[:2]
        assert header.split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#MsgId"]
        name, qid, status, msg_id = line.split()
        assert (name, qid, status) == (BROKER, "1", "SEND_OK")
        code, out, err = await admin(
            capsys, c, "queryMsgByOffset", *base, "-b", BROKER, "-i", "1", "-o", "3"
        )
        assert code == 0 and f"MsgId:               {msg_id}" in out, err
        assert re.search(r"^Keys:\s+\[kk\]$", out, re.M) and "[TagS]" in out
        assert "WARN: No Consumer" in out  # nobody consumes T yet
        code, out, err = await admin(capsys, c, "sendMessage", *base, "-p", "any queue")
        assert code == 0 and "SEND_OK" in out, err


async def test_bad_input_is_one_line_and_exit_1(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 43) as c:
        await start_broker_node(c)
        ns = c.namesrv_addr
        await make_topic(c, "T", 2)
        async with Producer("PG", ns, **client_kwargs(c, "10.0.9.8", "p")) as p:
            await p.send_to_queue(Message("T", b"only"), MessageQueue("T", BROKER, 0))
        t = ["-n", ns, "-t", "T"]
        nt = ["-n", ns, "-t", "NoTopic"]
        failed: list[tuple[list[str], str]] = [
            (["queryMsgByOffset", *nt, "-b", BROKER, "-i", "0", "-o", "0"], "no route for topic"),
            (["queryMsgByOffset", *t, "-b", "nob", "-i", "0", "-o", "0"], "broker nob does not"),
            (["queryMsgByOffset", *t, "-b", BROKER, "-i", "2", "-o", "0"], "queue id 2 is out"),
            (
                ["queryMsgByOffset", *t, "-b", BROKER, "-i", "0", "-o", "1"],
                "no message at offset 1 of topic T queue 0 on broker broker-a: the queue holds "
                "offsets 0..0",
            ),
            (["queryMsgByOffset", *t, "-b", BROKER, "-i", "1", "-o", "0"], "holds no message"),
            (["queryMsgByOffset", *t, "-b", BROKER, "-i", "0", "-o", "-1"], "offset -1 of"),
            (["queryMsgByUniqueKey", *t, "-i", "AB12"], "no message with unique key AB12"),
            (["queryMsgByUniqueKey", *nt, "-i", "AB12"], "no route for topic NoTopic"),
            (["printMsg", *nt], "no route for topic NoTopic"),
            (["consumeMessage", *nt], "no route for topic NoTopic"),
            (["consumeMessage", *t, "-b", "nob"], "broker nob does not serve topic T"),
            (["consumeMessage", *t, "-b", BROKER, "-i", "5"], "queue id 5 is out of range"),
            (["consumeMessage", *t, "-b", BROKER, "-i", "0", "-o", "1"], "offset 1 is beyond"),
            (["sendMessage", *nt, "-p", "x"], "no route for topic NoTopic"),
            (["sendMessage", *t, "-p", "x", "-b", "nob"], "broker nob does not serve topic T"),
            (["sendMessage", *t, "-p", "x", "-b", BROKER, "-i", "2"], "queue id 2 is out"),
        ]
        for argv, expected in failed:
            code, out, err = await admin(capsys, c, *argv)
            lines = err.strip().splitlines()
            assert code == 1 and len(lines) == 1, (argv, code, out, err)
            assert lines[0].startswith(f"rocketrio admin {argv[0]}: ") and expected in lines[0], (
                argv,
                err,
            )
        usage: list[tuple[list[str], str]] = [
            (["consumeMessage", *t, "-i", "0"], "set the brokerName (-b) with the queueId"),
            (["consumeMessage", *t, "-b", BROKER, "-o", "0"], "set the queueId (-i) with the"),
            (["consumeMessage", *t, "-c", "0"], "give a positive messageNumber"),
            (["consumeMessage", *t, "-s", "9", "-e", "1"], "beginTimestamp (-s) is after"),
            (["printMsg", *t, "-b", "yesterday"], "neither epoch milliseconds nor"),
            (["printMsg", *t, "-c", "no-such-charset"], "unknown charset no-such-charset"),
            (["sendMessage", *t, "-p", "x", "-i", "0"], "set the broker name (-b) when"),
        ]
        for argv, expected in usage:
            code, out, err = await admin(capsys, c, *argv)
            assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, (argv, err)
