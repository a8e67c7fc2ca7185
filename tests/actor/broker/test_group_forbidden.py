"""UPDATE_AND_GET_GROUP_FORBIDDEN (353) on SimNetwork + MockClock: set / clear / read a group's
read-forbidden bit on a topic, its persistence in subscriptionGroup.json (across a restart and a
kill -9), the pull refusal it causes (upstream: only on the registered-consumer path), and
DELETE_SUBSCRIPTIONGROUP dropping it."""

from __future__ import annotations

import json
import os
from typing import Any

import trio
import trio.testing

from rocketrio.protocol.bodies import (
    ConsumerData,
    GroupForbidden,
    HeartbeatData,
    SubscriptionData,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import UpdateGroupForbiddenRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_ext, to_json
from tests.harness.broker import BrokerHarness, harness, messages


def heartbeat_cmd(client_id: str) -> RemotingCommand:
    """Consumer group CG subscribes to Topic (tags a || b) from ``client_id``."""
    sub = SubscriptionData(topic="Topic", subString="a || b", tagsSet=["a", "b"])
    data = HeartbeatData(
        clientID=client_id,
        consumerDataSet=[ConsumerData(groupName="CG", subscriptionDataSet=[sub])],
    )
    return RemotingCommand(RequestCode.HEART_BEAT, body=to_json(data))


async def forbidden(
    h: BrokerHarness, group: str, topic: str, readable: bool | None = None
) -> GroupForbidden:
    header = UpdateGroupForbiddenRequestHeader(group, topic, readable)
    resp = await h.invoke(
        RemotingCommand(RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN, ext_fields=to_ext(header))
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return from_json(GroupForbidden, resp.body)


def saved_table(h: BrokerHarness) -> dict[str, Any]:
    path = os.path.join(h.broker.config.storePathRootDir, "config", "subscriptionGroup.json")
    with open(path) as f:
        table: dict[str, Any] = json.load(f)["forbiddenTable"]
    return table


async def test_forbid_read_refuses_pull_and_persists(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await h.send("Topic", b"a1", tags="a", queue_id=0)
        await h.invoke(heartbeat_cmd("c1@1"))
        assert await forbidden(h, "CG", "Topic") == GroupForbidden("CG", "Topic", True)
        assert [m.body for m in messages(await h.pull("Topic", 0, 0, sub=None, flags=0))] == [b"a1"]
        assert await forbidden(h, "CG", "Topic", False) == GroupForbidden("CG", "Topic", False)
        assert saved_table(h) == {"CG": {"Topic": 4}}  # bit PermName.INDEX_PERM_READ (2)
        resp = await h.pull("Topic", 0, 0, sub=None, flags=0)
        assert resp.code == ResponseCode.NO_PERMISSION
        assert resp.remark == "the consumer group[CG] is forbidden for topic[Topic]"
        # another group is not touched
        assert await forbidden(h, "Other", "Topic") == GroupForbidden("Other", "Topic", True)
        # a restart and a kill -9 keep it: it was on disk before the answer
        await h.stop_broker()
        await h.start_broker()
        await h.invoke(heartbeat_cmd("c1@1"))
        assert (await h.pull("Topic", 0, 0, sub=None, flags=0)).code == ResponseCode.NO_PERMISSION
        await h.crash_broker()
        await h.start_broker()
        assert await forbidden(h, "CG", "Topic") == GroupForbidden("CG", "Topic", False)
        # allowed again: pulls serve again and the group's entry is gone
        await h.invoke(heartbeat_cmd("c1@1"))
        assert await forbidden(h, "CG", "Topic", True) == GroupForbidden("CG", "Topic", True)
        assert saved_table(h) == {}
        assert [m.body for m in messages(await h.pull("Topic", 0, 0, sub=None, flags=0))] == [b"a1"]


async def test_pull_with_subscription_flag_is_not_checked(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """Upstream checks the bit only where the broker uses the registered subscription (no
    SUBSCRIPTION flag): a pull that carries its own subscription is served."""
    async with harness(tmp_path) as h:
        await h.send("Topic", b"a1", tags="a", queue_id=0)
        await forbidden(h, "CG", "Topic", False)
        assert [m.body for m in messages(await h.pull("Topic", 0, 0))] == [b"a1"]


async def test_clear_drops_the_groups_whole_entry_and_delete_group_drops_it(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await forbidden(h, "CG", "A", False)
        await forbidden(h, "CG", "B", False)
        assert saved_table(h) == {"CG": {"A": 4, "B": 4}}
        # upstream's updateForbiddenValue: a value dropping to 0 removes the group's map
        assert await forbidden(h, "CG", "A", True) == GroupForbidden("CG", "A", True)
        assert await forbidden(h, "CG", "B") == GroupForbidden("CG", "B", True)
        await forbidden(h, "CG", "B", False)
        await h.invoke(
            RemotingCommand(RequestCode.DELETE_SUBSCRIPTIONGROUP, ext_fields={"groupName": "CG"})
        )
        assert await forbidden(h, "CG", "B") == GroupForbidden("CG", "B", True)
        assert saved_table(h) == {}


async def test_missing_group_or_topic_is_refused(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        resp = await h.invoke(
            RemotingCommand(RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN, ext_fields={"group": "G"})
        )
        assert resp.code != ResponseCode.SUCCESS
        assert "topic" in (resp.remark or "")
