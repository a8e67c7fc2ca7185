"""Upstream's -mf / -fr of updateStaticTopic and remappingStaticTopic (issue 30 item 4;
SimNetwork, MockClock): the mapping before and the computed plan are written to files before
anything is sent; a (reviewed, or edited) file is applied instead of a computed plan, which is
how a remapping stopped before it was sent is carried out later and how one logic queue is
updated alone; without -fr a file older than what the brokers hold is refused, with -fr it
replaces it."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.static_topic_admin import (
    remapping_static_topic,
    update_static_topic,
)
from rocketrio.actors.client.static_topic_mapfile import (
    apply_mapping_file,
    read_mapping_file,
    write_review_files,
)
from rocketrio.protocol import fastjson
from rocketrio.protocol.static_topic_alloc import TopicRemappingDetailWrapper
from tests.harness.clients import cluster
from tests.harness.clock import now_ms
from tests.harness.static_topic import T, leaders, route_until

Plans = list[tuple[TopicRemappingDetailWrapper, TopicRemappingDetailWrapper]]


class Stop(Exception):
    """Stops a command after its plan was written (as if the admin died right then)."""


async def test_plans_are_written_for_review_and_a_written_plan_is_applied_later(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    files = tmp_path / "maps"
    written: list[tuple[Path, Path]] = []

    def keep(before: TopicRemappingDetailWrapper, after: TopicRemappingDetailWrapper) -> None:
        written.append(write_review_files(files, before, after))

    def keep_and_stop(
        before: TopicRemappingDetailWrapper, after: TopicRemappingDetailWrapper
    ) -> None:
        keep(before, after)
        raise Stop

    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        created = await update_static_topic(
            admin, T, 8, clusters="DefaultCluster", now_ms=now_ms, review=keep
        )
        old, new = written[-1]
        assert old.name.endswith(".before") and new.name == f"{T}-{created.epoch}.after"
        assert new.read_bytes().startswith(b"{")  # fastjson's JSON, as upstream writes it
        assert read_mapping_file(T, new.read_bytes()).epoch == created.epoch
        before = leaders(await route_until(admin, lambda r: len(leaders(r)) == 8))
        await c.start_broker("broker-c", "10.0.1.3")

        # the remapping is computed and written, then the admin stops: nothing was sent
        with pytest.raises(Stop):
            await remapping_static_topic(
                admin, T, brokers="broker-b,broker-c", now_ms=now_ms, review=keep_and_stop
            )
        await trio.sleep(5)
        assert leaders(await route_until(admin, lambda r: True)) == before
        plan_file = written[-1][1]
        # a file for another topic, or an edited file that breaks a rule, is refused
        with pytest.raises(MQClientError, match=r"is for topic ST"):
            await apply_mapping_file(admin, "Other", plan_file.read_bytes())
        plan = read_mapping_file(T, plan_file.read_bytes())
        broken = read_mapping_file(T, plan_file.read_bytes())
        detail = broken.brokerConfigMap["broker-b"].mappingDetail
        assert detail is not None
        detail.epoch -= 1  # the brokers of one plan must agree on its epoch
        with pytest.raises(MQClientError, match="inconsistent"):
            await apply_mapping_file(admin, T, fastjson.encode(broken))
        moved = sorted(plan.brokerToMapIn)
        assert moved == ["broker-c"]

        # the reviewed file is applied: the remapping is carried out as computed
        result = await apply_mapping_file(admin, T, plan_file.read_bytes())
        assert result.mapIn == ["broker-c"] and result.mapOut == ["broker-a"]
        after = leaders(await route_until(admin, lambda r: "broker-c" in set(leaders(r).values())))
        assert {g for g, b in after.items() if b == "broker-c"} == {
            g for g, b in before.items() if b == "broker-a"
        }

        # the file of the creation is older than what the brokers hold now: refused ...
        first = written[0][1].read_bytes()
        with pytest.raises(MQBrokerError):
            await apply_mapping_file(admin, T, first)
        # ... unless forced (-fr true): the brokers take it
        forced = await apply_mapping_file(admin, T, first, force=True)
        assert forced.epoch == created.epoch


async def test_one_logic_queue_is_updated_alone_from_an_edited_file(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A remapping plan edited to move one logic queue only: that queue moves, the other seven
    keep their leaders."""
    files = tmp_path / "maps"
    written: list[tuple[Path, Path]] = []

    def keep_and_stop(
        before: TopicRemappingDetailWrapper, after: TopicRemappingDetailWrapper
    ) -> None:
        written.append(write_review_files(files, before, after))
        raise Stop

    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await update_static_topic(admin, T, 8, clusters="DefaultCluster", now_ms=now_ms)
        before = leaders(await route_until(admin, lambda r: len(leaders(r)) == 8))
        await c.start_broker("broker-c", "10.0.1.3")
        with pytest.raises(Stop):
            await remapping_static_topic(
                admin, T, brokers="broker-b,broker-c", now_ms=now_ms, review=keep_and_stop
            )
        plan = read_mapping_file(T, written[-1][1].read_bytes())
        c_detail = plan.brokerConfigMap["broker-c"].mappingDetail
        assert c_detail is not None
        moving = sorted(c_detail.hostedQueues)
        keep, move = moving[1:], moving[0]
        # the edit: the logic queues but one go back to their old lists on broker-a
        old = read_mapping_file(T, written[-1][0].read_bytes())
        a_old = old.brokerConfigMap["broker-a"].mappingDetail
        a_new = plan.brokerConfigMap["broker-a"].mappingDetail
        c_new = plan.brokerConfigMap["broker-c"].mappingDetail
        assert a_old is not None and a_new is not None and c_new is not None
        for gid in keep:
            a_new.hostedQueues[gid] = a_old.hostedQueues[gid]
            del c_new.hostedQueues[gid]
        await apply_mapping_file(admin, T, fastjson.encode(plan))
        after = leaders(await route_until(admin, lambda r: "broker-c" in set(leaders(r).values())))
        assert after[move] == "broker-c"
        assert {g: b for g, b in after.items() if g != move} == {
            g: b for g, b in before.items() if g != move
        }
