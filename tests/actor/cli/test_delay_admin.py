"""`rocketrio admin queryMsgById` / `queryMsgByUniqueKey` on delay and timer messages: while one
waits, its offset id shows it in SCHEDULE_TOPIC_XXXX / rmq_sys_wheel_timer with where it goes
and when (timer) or at which level; once delivered, its UNIQ_KEY finds it in its real topic
(same keys and UNIQ_KEY as sent)."""

from __future__ import annotations

import re
from pathlib import Path

import trio
import trio.testing

from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from tests.harness.admin_cli import (
    ISO_DATE,
    Capture,
    admin,
    client_kwargs,
    make_topic,
    start_broker_node,
)
from tests.harness.replication import cluster


async def test_a_waiting_message_shows_where_and_when_then_is_found_in_its_topic(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 43) as c:
        await start_broker_node(c)
        ns = c.namesrv_addr
        await make_topic(c, "T", 1)
        async with Producer("PG", ns, **client_kwargs(c, "10.0.9.8", "p")) as p:
            timer = await p.send(
                Message("T", b"later", keys="kt", properties={"TIMER_DELAY_SEC": "60"})
            )
            level = await p.send(Message("T", b"soon", keys="kl", delay_time_level=2))
        code, out, err = await admin(capsys, c, "queryMsgById", "-n", ns, "-i", timer.offset_msg_id)
        assert code == 0, err
        assert re.search(r"^Topic:\s+rmq_sys_wheel_timer$", out, re.M), out
        assert re.search(r"^Waiting For:\s+T queue 0$", out, re.M), out
        assert re.search(rf"^Deliver Time:\s+{ISO_DATE}$", out, re.M), out
        code, out, err = await admin(capsys, c, "queryMsgById", "-n", ns, "-i", level.offset_msg_id)
        assert code == 0, err
        assert re.search(r"^Topic:\s+SCHEDULE_TOPIC_XXXX$", out, re.M), out
        assert re.search(r"^Delay Level:\s+2$", out, re.M), out
        await trio.sleep(61)
        for sent, body in ((timer, "later"), (level, "soon")):
            code, out, err = await admin(
                capsys, c, "queryMsgByUniqueKey", "-n", ns, "-t", "T", "-i", sent.msg_id
            )
            assert code == 0, err
            assert re.search(r"^Topic:\s+T$", out, re.M), out
            assert re.search(rf"^Message Body:\s+{body}$", out, re.M), out
            assert "Waiting For:" not in out
