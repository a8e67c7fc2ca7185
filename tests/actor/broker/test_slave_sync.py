"""SlaveSynchronize against a scripted master (no network): what a slave adopts, and when.

The regression these tests hold: a slave's request to its master, sent before the master hung,
was answered after the slave had been promoted and the old master woke up. The promoted broker
took the old master's topic table (4 queues where it served 4 + 4 more with acknowledged
messages in them) and the old offsets: 1,152 acknowledged messages were stored but never
consumed (system/test_controller_failover.py::test_a_hung_master_...).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.roles.slave_sync import (
    CALL_TIMEOUT_S,
    POLL_S,
    SYNC_PERIOD_S,
    SlaveSynchronize,
    SyncRefused,
)
from rocketrio.actors.broker.tables.subscription_group import PERM_INDEX_READ
from rocketrio.actors.broker.tables.tables import GROUPS_FILE
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import (
    ConsumerOffsetSerializeWrapper,
    DataVersion,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.slave_sync import GROUP_KEY, OLD, ScriptedMaster, tables


async def test_an_answer_that_arrives_after_promotion_is_not_applied(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    topics, groups, offsets = tables(tmp_path)
    # what this broker serves as the new master: 8 queues, a consumer at offset 500
    topics.update(TopicConfig("T", 8, 8))
    offsets.table[GROUP_KEY] = {0: 500}
    following: list[str | None] = [OLD]
    master = ScriptedMaster(queues=4, offset=100)

    async def promoted_meanwhile(code: int) -> None:
        following[0] = None  # the controller made this broker master; the old one wakes up

    master.before_answer = promoted_meanwhile
    sync = SlaveSynchronize(
        topics=topics, groups=groups, offsets=offsets, master_addr=lambda: following[0]
    )
    with pytest.raises(SyncRefused, match="no longer this broker's master"):
        await sync.sync_all(master, OLD)  # type: ignore[arg-type]
    tc = topics.select("T")
    assert tc is not None and (tc.readQueueNums, tc.writeQueueNums) == (8, 8)
    assert offsets.table[GROUP_KEY] == {0: 500}
    assert sync.stale_answers == 1 and sync.rounds == 0


async def test_a_slave_adopts_its_masters_tables(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    topics, groups, offsets = tables(tmp_path)
    master = ScriptedMaster(queues=4, offset=100)
    sync = SlaveSynchronize(topics=topics, groups=groups, offsets=offsets, master_addr=lambda: OLD)
    await sync.sync_all(master, OLD)  # type: ignore[arg-type]
    tc = topics.select("T")
    assert tc is not None and tc.readQueueNums == 4
    assert offsets.table[GROUP_KEY] == {0: 100}
    assert sync.rounds == 1 and sync.stale_answers == 0


async def test_a_new_queue_in_the_store_syncs_at_once_not_at_the_period(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    topics, groups, offsets = tables(tmp_path)
    master = ScriptedMaster(queues=4, offset=100)
    queues = [0]
    sync = SlaveSynchronize(
        topics=topics,
        groups=groups,
        offsets=offsets,
        master_addr=lambda: OLD,
        queue_count=lambda: queues[0],
    )
    async with trio.open_nursery() as n:
        n.start_soon(sync.run, master)
        await trio.sleep(0.05)
        assert sync.rounds == 1  # the first round runs at start
        await trio.sleep(1.0)
        assert sync.rounds == 1  # idle: the next round waits for the period
        queues[0] = 1  # a record of a queue the slave never held was replicated
        await trio.sleep(0.15)  # one 0.1 s poll; the scripted master answers at once
        assert sync.rounds == 2
        await trio.sleep(SYNC_PERIOD_S)
        assert sync.rounds == 3  # and the period still runs
        n.cancel_scope.cancel()


async def test_a_master_whose_queues_grow_waits_instead_of_spinning(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A master follows no one; its store creates queues all the time. The loop must still
    wait out its period (a spin here once hung the whole broker)."""
    topics, groups, offsets = tables(tmp_path)
    calls = [0]

    def growing() -> int:
        calls[0] += 1
        if calls[0] > 1000:
            raise AssertionError("the sync loop spins on a master")
        return calls[0]

    sync = SlaveSynchronize(
        topics=topics, groups=groups, offsets=offsets, master_addr=lambda: None, queue_count=growing
    )
    with trio.move_on_after(10):
        await sync.run(ScriptedMaster(queues=4, offset=0))  # type: ignore[arg-type]
    assert sync.rounds == 0 and calls[0] < 1000


class SlowLink:
    """The scripted master behind a link that takes ``one_way_s`` each way; its group's
    committed offset is ten times the clock (a consumer committing all the time)."""

    def __init__(self, master: ScriptedMaster, one_way_s: float) -> None:
        self.master, self.one_way_s = master, one_way_s

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        await trio.sleep(self.one_way_s)
        now = int(trio.current_time() * 10)
        self.master.offsets = ConsumerOffsetSerializeWrapper(offsetTable={GROUP_KEY: {0: now}})
        answer = await self.master.invoke(addr, cmd, timeout)
        await trio.sleep(self.one_way_s)
        return answer


async def test_offsets_lag_by_one_period_and_one_call_however_slow_the_round(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A round of the other tables is several calls (here topics and groups, 1.8 s each on a
    0.9 s link; in a broker also delay offsets and ACLs): the offsets must not wait for it.
    The slave's offset is always at least what the master held one period and one call ago
    (docs/metadata-failover.md's 6 s bound; before the offsets had their own loop, behind
    three calls and the period, the lag reached 9.3 s here)."""
    topics, groups, offsets = tables(tmp_path)
    sync = SlaveSynchronize(topics=topics, groups=groups, offsets=offsets, master_addr=lambda: OLD)
    link = SlowLink(ScriptedMaster(queues=4, offset=0), one_way_s=0.9)
    worst = 0.0
    async with trio.open_nursery() as n:
        n.start_soon(sync.run, link)
        with trio.fail_after(SYNC_PERIOD_S + 4 * CALL_TIMEOUT_S):  # the first round
            while offsets.query("G", "T", 0) < 0:
                await trio.sleep(0.1)
        for _ in range(300):  # 30 s
            await trio.sleep(0.1)
            worst = max(worst, trio.current_time() - offsets.query("G", "T", 0) / 10)
        n.cancel_scope.cancel()
    assert worst <= SYNC_PERIOD_S + CALL_TIMEOUT_S, f"the slave's offset lagged {worst:.1f}s"
    assert sync.rounds >= 3  # the metadata rounds still run


async def test_a_new_master_is_synced_within_one_poll_by_both_loops(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A master demoted to a slave (or a slave given another master) starts both loops'
    rounds within `POLL_S`, not at the end of their period."""
    topics, groups, offsets = tables(tmp_path)
    following: list[str | None] = [None]
    sync = SlaveSynchronize(
        topics=topics, groups=groups, offsets=offsets, master_addr=lambda: following[0]
    )
    master = ScriptedMaster(queues=4, offset=100)

    class AnyMaster:  # the scripted master answers for whichever address is asked
        async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
            return await master.invoke(OLD, cmd, timeout)

    async with trio.open_nursery() as n:
        n.start_soon(sync.run, AnyMaster())
        await trio.sleep(1.0)
        assert sync.rounds == 0 and offsets.query("G", "T", 0) < 0
        following[0] = OLD
        await trio.sleep(POLL_S + 0.01)
        assert sync.rounds == 1 and offsets.query("G", "T", 0) == 100
        await trio.sleep(1.0)
        following[0] = "127.0.0.1:10912"  # another master
        await trio.sleep(POLL_S + 0.01)
        assert sync.rounds == 2 and sync.synced_from == "127.0.0.1:10912"
        n.cancel_scope.cancel()


@pytest.mark.parametrize("following", [None, OLD])
async def test_an_idle_broker_polls_once_a_poll_not_once_a_loop(
    tmp_path: Path, mock_clock: trio.testing.MockClock, following: str | None
) -> None:
    """Nothing moves (a master, or a slave between rounds): about one read of the master per
    `POLL_S` (the watcher's), the two loops asleep until their period ends."""
    topics, groups, offsets = tables(tmp_path)
    reads = [0]
    # 10 s of polls, plus each loop's reads at its period's end and a round's own checks;
    # a read per loop per poll (the two loops polling on their own) would be twice the polls
    limit = int(10 / POLL_S) * 3 // 2

    def master_addr() -> str | None:
        reads[0] += 1
        if reads[0] > limit:
            raise AssertionError("the master is read once a loop per poll")
        return following

    sync = SlaveSynchronize(topics=topics, groups=groups, offsets=offsets, master_addr=master_addr)
    with trio.move_on_after(10):
        await sync.run(ScriptedMaster(queues=4, offset=0))  # type: ignore[arg-type]
    assert reads[0] >= int(10 / POLL_S)


async def test_a_broker_that_never_follows_a_master_does_not_poll(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A classic master (`RoleService.may_follow` False) never reads the master at all."""
    topics, groups, offsets = tables(tmp_path)

    def master_addr() -> str | None:
        raise AssertionError("a classic master polled for a master")

    sync = SlaveSynchronize(
        topics=topics, groups=groups, offsets=offsets, master_addr=master_addr, may_follow=False
    )
    with trio.move_on_after(10):
        await sync.run(ScriptedMaster(queues=4, offset=0))  # type: ignore[arg-type]
    assert sync.rounds == 0


class GroupsMaster(ScriptedMaster):
    """A scripted master whose group table is newer and carries its own forbidden bits."""

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        if cmd.code == RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
            wrapper = SubscriptionGroupWrapper(
                subscriptionGroupTable={"MG": SubscriptionGroupConfig("MG")},
                dataVersion=DataVersion(0, 1, 99),
                forbiddenTable={"MG": {"T": 4}},
            )
            return RemotingCommand(ResponseCode.SUCCESS, body=fastjson.encode(wrapper))
        return await super().invoke(addr, cmd, timeout)


async def test_a_slave_keeps_its_own_forbidden_bits(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Upstream's SlaveSynchronize copies the group configs, not the forbidden table: each
    broker's UPDATE_AND_GET_GROUP_FORBIDDEN bits are its own."""
    topics, groups, offsets = tables(tmp_path)
    groups.update_forbidden("SG", "T", PERM_INDEX_READ, True)
    sync = SlaveSynchronize(topics=topics, groups=groups, offsets=offsets, master_addr=lambda: OLD)
    await sync.sync_all(GroupsMaster(queues=4, offset=0), OLD)  # type: ignore[arg-type]
    assert "MG" in groups.table
    assert groups.forbidden == {"SG": {"T": 4}}
    on_disk = json.loads((tmp_path / "config" / GROUPS_FILE).read_text())
    assert on_disk["forbiddenTable"] == {"SG": {"T": 4}}
