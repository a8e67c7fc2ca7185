"""CLEAN_UNUSED_TOPIC (316) on SimNetwork + MockClock: the queues of a topic without a config
are dropped, a configured topic's and a system topic's are kept, and a kill -9 after the answer
does not bring the dropped queues back."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.tables.topic_config import RMQ_SYS_SCHEDULE_TOPIC
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.broker import BrokerHarness, harness, messages


def queue_topics(h: BrokerHarness) -> set[str]:
    return h.broker.store.message_store.queue_topics()


async def clean(h: BrokerHarness) -> RemotingCommand:
    return await h.invoke(RemotingCommand(RequestCode.CLEAN_UNUSED_TOPIC))


async def test_only_topics_without_config_lose_their_queues(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        for topic in ("Kept", "Orphan"):
            for q in range(2):
                await h.send(topic, f"{topic}{q}".encode(), queue_id=q)
        await h.send("Kept", b"later", queue_id=0, props={"DELAY": "1"})  # SCHEDULE_TOPIC_XXXX
        # the config goes, the queues stay (a lost or hand-edited topics.json)
        assert h.broker.tables.topics.delete("Orphan")
        before = queue_topics(h)
        assert {"Kept", "Orphan", RMQ_SYS_SCHEDULE_TOPIC} <= before
        resp = await clean(h)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert queue_topics(h) == before - {"Orphan"}
        assert [m.body for m in messages(await h.pull("Kept", 1, 0))] == [b"Kept1"]
        # a second call finds nothing to do
        assert (await clean(h)).code == ResponseCode.SUCCESS
        assert queue_topics(h) == before - {"Orphan"}
        # kill -9 right after the answer: recovery does not re-dispatch the dropped queues
        await h.crash_broker()
        await h.start_broker()
        assert "Orphan" not in queue_topics(h)
        assert [m.body for m in messages(await h.pull("Kept", 0, 0))][:1] == [b"Kept0"]


async def test_a_broker_not_serving_as_master_removes_nothing(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await h.send("Orphan", b"x", queue_id=0)
        assert h.broker.tables.topics.delete("Orphan")
        h.broker.admin.is_master = lambda: False
        resp = await clean(h)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark is not None and "only on a broker serving as master" in resp.remark
        assert "Orphan" in queue_topics(h)
