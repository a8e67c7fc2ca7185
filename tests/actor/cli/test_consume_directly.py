"""queryMsgByUniqueKey -g/-d (CONSUME_MESSAGE_DIRECTLY, 309) in-process against a controller, a
NameServer and a broker on the simulated network (MockClock): the broker that stored the message
passes it to the named push consumer client, whose listener consumes it once more, outside its
queues (no offset moves), and the admin prints upstream's ConsumeMessageDirectlyResult (the
listener's status, an exception as CR_THROW_EXCEPTION with its text, an orderly consumer's COMMIT
with order=true and its autoCommit); a client that is not online, or no push consumer of the
group, is one line and exit 1."""

from __future__ import annotations

import re
from pathlib import Path

import trio
import trio.testing

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rocketrio.actors.client.orderly_consumer import OrderlyPushConsumer
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt
from tests.harness.admin_cli import (
    HOST,
    Capture,
    admin,
    client_kwargs,
    make_topic,
    start_broker_node,
)
from tests.harness.replication import cluster

BROKER_ADDR = "10.0.2.1:10911"  # the cluster's first broker node
MQ = MessageQueue("T", "broker-a", 0)
RESULT = re.compile(
    r"^ConsumeMessageDirectlyResult \[order=(\w+), autoCommit=(\w+), consumeResult=(\w+), "
    r"remark=(.*), spentTimeMills=(\d+)\]$",
    re.M,
)


async def test_a_push_consumer_consumes_a_message_directly(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 43) as c:
        await start_broker_node(c)
        ns = c.namesrv_addr
        await make_topic(c, "T", 1)
        got: list[MessageExt] = []
        verdict: list[ConsumeStatus | Exception] = [ConsumeStatus.CONSUME_SUCCESS]

        def listener(msgs: list[MessageExt]) -> ConsumeStatus:
            got.extend(msgs)
            if isinstance(verdict[0], Exception):
                raise verdict[0]
            return verdict[0]

        consumer = PushConsumer(
            "G", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            **client_kwargs(c, "10.0.9.6", "c1"),
        )  # fmt: skip
        consumer.subscribe("T")
        consumer.register_listener(listener)
        async with Producer("PG", ns, **client_kwargs(c, "10.0.9.8", "p")) as p, consumer:
            sent = await p.send(Message("T", b"direct me", tags="TagA", keys="k1"))
            with trio.fail_after(60):
                while not got:
                    await trio.sleep(0.1)
            await trio.sleep(6)  # the offset is persisted
            assert len(got) == 1
            async with MQAdmin(ns, c.net.transport(HOST)) as mq:
                committed = await mq.api.query_consumer_offset(BROKER_ADDR, "G", MQ)
            assert committed == 1
            cid = consumer.client.client_id
            argv = ["queryMsgByUniqueKey", "-n", ns, "-t", "T", "-i", sent.msg_id]
            code, out, err = await admin(capsys, c, *argv, "-g", "G", "-d", cid)
            assert code == 0, err
            m = RESULT.search(out)
            assert m is not None, out
            assert m.groups()[:4] == ("false", "true", "CR_SUCCESS", "null")
            assert len(got) == 2 and got[1].body == b"direct me" and got[1].msg_id == sent.msg_id
            assert got[1].topic == "T" and got[1].tags == "TagA"

            verdict[0] = ConsumeStatus.RECONSUME_LATER
            code, out, _ = await admin(capsys, c, *argv, "-g", "G", "-d", cid)
            assert code == 0 and (m := RESULT.search(out)) is not None
            assert m.group(3) == "CR_LATER"

            verdict[0] = ValueError("no room")
            code, out, _ = await admin(capsys, c, *argv, "-g", "G", "-d", cid)
            assert code == 0 and (m := RESULT.search(out)) is not None
            assert (m.group(3), m.group(4)) == ("CR_THROW_EXCEPTION", "ValueError: no room")
            assert len(got) == 4
            # consumed outside the queues: nothing redelivered, the offset where it was
            await trio.sleep(6)
            assert len(got) == 4
            async with MQAdmin(ns, c.net.transport(HOST)) as mq:
                assert await mq.api.query_consumer_offset(BROKER_ADDR, "G", MQ) == committed

            code, out, err = await admin(capsys, c, *argv, "-g", "G", "-d", "10.0.9.9@gone")
            assert code == 1 and out == ""
            assert "10.0.9.9@gone" in err and "not online" in err and len(err.splitlines()) == 1
            code, _, err = await admin(capsys, c, *argv, "-g", "G", "-d", cid, "--json")
            assert code == 0


async def test_an_orderly_consumer_reports_its_status_and_auto_commit(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 44) as c:
        await start_broker_node(c)
        ns = c.namesrv_addr
        await make_topic(c, "T", 1)
        got: list[MessageExt] = []

        def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
            got.extend(msgs)
            if len(got) == 1:
                return ConsumeOrderlyStatus.SUCCESS
            ctx.auto_commit = False
            return ConsumeOrderlyStatus.COMMIT

        consumer = OrderlyPushConsumer(
            "GO", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            **client_kwargs(c, "10.0.9.5", "o1"),
        )  # fmt: skip
        consumer.subscribe("T")
        consumer.register_listener(listener)
        async with Producer("PG", ns, **client_kwargs(c, "10.0.9.8", "p")) as p, consumer:
            sent = await p.send(Message("T", b"in order"))
            with trio.fail_after(60):
                while not got:
                    await trio.sleep(0.1)
            argv = ["queryMsgByUniqueKey", "-n", ns, "-t", "T", "-i", sent.msg_id]
            cid = consumer.client.client_id
            code, out, err = await admin(capsys, c, *argv, "-g", "GO", "-d", cid)
            assert code == 0, err
            m = RESULT.search(out)
            assert m is not None and m.groups()[:3] == ("true", "false", "CR_COMMIT"), out
            # the client has no push consumer of group G: upstream's refusal, exit 1
            code, out, err = await admin(capsys, c, *argv, "-g", "G", "-d", cid)
            assert code == 1 and len(err.splitlines()) == 1, err
