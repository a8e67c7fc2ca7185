"""The pull processor alone (actors/broker/pull/processor.py and hold.py): store statuses to
outcomes, refusals, held pulls woken by arrivals, bounded and timed holds, off-loop reads of big
pulls only. No sockets, no Broker, no RemotingCommand in or out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.clients.client_manager import ClientChannelInfo, ConsumerManager
from rocketrio.actors.broker.dispatch.outcomes import (
    Pulled,
    PullOutcome,
    PullStatus,
    Refusal,
)
from rocketrio.actors.broker.pull.hold import HoldLimits, PullRequestHoldService
from rocketrio.actors.broker.pull.processor import PullConfig, PullMessageProcessor, pull_status
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.view import ReadGate, StoreView
from rocketrio.protocol.bodies import (
    TopicConfig,
)
from rocketrio.protocol.headers import (
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    PullMessageRequestHeader,
)
from rocketrio.storage.message_store import (
    GetMessageStatus,
    MessageToStore,
)
from tests.harness.processors import (
    NOW_MS,
    RC,
    broker_config,
    inline,
    open_store,
    tables,
)


class Reply:
    def __init__(self, owner: str = "conn-1") -> None:
        self.outcomes: list[PullOutcome] = []
        self.gone = False
        self.owner = owner

    def deliver(self, outcome: PullOutcome) -> None:
        self.outcomes.append(outcome)


class Puller:
    def __init__(
        self,
        tmp_path: Path,
        run_blocking: Callable[[Callable[[], Any]], Any] = inline,
        **config: Any,
    ) -> None:
        self.config = broker_config(tmp_path, **config)
        self.topics, self.groups, self.offsets = tables(self.config)
        self.topics.update(TopicConfig("T", 2, 2))
        self.store = open_store(tmp_path)
        self.gate = ReadGate(run_blocking)
        self.consumers = ConsumerManager()
        self.hold = PullRequestHoldService()
        self.stats = BrokerStats()
        self.processor = PullMessageProcessor(
            PullConfig.of(self.config),
            topics=self.topics,
            groups=self.groups,
            consumers=self.consumers,
            offsets=self.offsets,
            store=StoreView(self.store, self.gate, off_loop_read_bytes=64 * 1024),
            hold=self.hold,
            stats=self.stats,
        )

    def put(self, n: int, tags: str = "a", queue_id: int = 0) -> None:
        self.store.put_messages(
            [
                MessageToStore("T", queue_id, b"m%d" % i, properties={"TAGS": tags})
                for i in range(n)
            ],
            NOW_MS,
        )

    async def pull(
        self,
        offset: int,
        *,
        topic: str = "T",
        expr: str = "*",
        flags: int = 0,
        owner: str = "conn-1",
        **h: Any,
    ) -> tuple[PullOutcome | None, Reply]:
        header = PullMessageRequestHeader(
            consumerGroup="CG",
            topic=topic,
            queueId=0,
            queueOffset=offset,
            maxMsgNums=32,
            sysFlag=PULL_FLAG_SUBSCRIPTION | flags,
            commitOffset=0,
            subVersion=0,
            subscription=expr,
            **({"suspendTimeoutMillis": 15_000} | h),
        )
        reply = Reply(owner)
        return await self.processor.pull(header, reply), reply


def status_of(outcome: PullOutcome | None) -> PullStatus:
    assert isinstance(outcome, Pulled), outcome
    return outcome.status


async def test_pull_maps_store_statuses_to_outcomes(tmp_path: Path) -> None:
    p = Puller(tmp_path)
    assert status_of((await p.pull(0))[0]) is PullStatus.NO_NEW_MSG  # no queue yet
    assert status_of((await p.pull(5))[0]) is PullStatus.OFFSET_ILLEGAL
    p.put(3)
    found, _ = await p.pull(0)
    assert isinstance(found, Pulled) and found.status is PullStatus.FOUND
    assert found.result.message_count == 3 and found.result.next_begin_offset == 3
    # statistics: the found read counts its messages, the two reads before were misses
    assert p.stats.items.get_total() == 3
    assert (p.stats.store.get_found, p.stats.store.get_miss) == (1, 2)
    assert status_of((await p.pull(3))[0]) is PullStatus.NO_NEW_MSG  # OFFSET_OVERFLOW_ONE
    assert status_of((await p.pull(9))[0]) is PullStatus.OFFSET_ILLEGAL  # OVERFLOW_BADLY
    assert status_of((await p.pull(0, expr="b"))[0]) is PullStatus.NO_MATCHED_MSG


@pytest.mark.parametrize(
    ("status", "offset", "expected"),
    [
        (GetMessageStatus.FOUND, 3, PullStatus.FOUND),
        (GetMessageStatus.NO_MATCHED_MESSAGE, 3, PullStatus.NO_MATCHED_MSG),
        (GetMessageStatus.MESSAGE_WAS_REMOVING, 3, PullStatus.NO_MATCHED_MSG),
        (GetMessageStatus.OFFSET_FOUND_NULL, 3, PullStatus.NO_NEW_MSG),
        (GetMessageStatus.OFFSET_OVERFLOW_ONE, 3, PullStatus.NO_NEW_MSG),
        (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 3, PullStatus.OFFSET_ILLEGAL),
        (GetMessageStatus.OFFSET_TOO_SMALL, 3, PullStatus.OFFSET_ILLEGAL),
        (GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, PullStatus.NO_NEW_MSG),
        (GetMessageStatus.NO_MESSAGE_IN_QUEUE, 3, PullStatus.OFFSET_ILLEGAL),
        (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, PullStatus.NO_NEW_MSG),
        (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 3, PullStatus.OFFSET_ILLEGAL),
    ],
)
def test_pull_status_of_every_store_status(
    status: GetMessageStatus, offset: int, expected: PullStatus
) -> None:
    assert pull_status(status, offset) is expected


async def test_pull_refusals(tmp_path: Path) -> None:
    p = Puller(tmp_path)
    refusal, _ = await p.pull(0, topic="Nope")
    assert refusal == Refusal(RC.TOPIC_NOT_EXIST, "topic[Nope] not exist, apply first please!")
    header = PullMessageRequestHeader("CG", "T", 0, 0, 32, 0, 0, 15_000, 0)  # no SUBSCRIPTION
    refusal = await p.processor.pull(header, Reply())
    assert isinstance(refusal, Refusal) and refusal.code == RC.SUBSCRIPTION_NOT_EXIST
    p.consumers.register(
        "CG", ClientChannelInfo("c", "id", "JAVA", 1, 0), "PUSH", "CLUSTERING", "LAST", []
    )
    refusal = await p.processor.pull(header, Reply())
    assert isinstance(refusal, Refusal) and "does not subscribe to T" in refusal.remark


async def test_a_held_pull_is_answered_when_a_message_arrives(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    p = Puller(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(p.hold.run)
        outcome, reply = await p.pull(0, flags=PULL_FLAG_SUSPEND)
        assert outcome is None and p.hold.count == 1
        await trio.sleep(1)
        assert reply.outcomes == []
        p.put(2)
        p.hold.notify_arrivals({("T", 0): 2})
        await trio.testing.wait_all_tasks_blocked()
        [answer] = reply.outcomes
        assert isinstance(answer, Pulled) and answer.status is PullStatus.FOUND
        assert answer.result.message_count == 2 and p.hold.count == 0
        # an idle held pull gets its last attempt at the deadline
        outcome, idle = await p.pull(2, flags=PULL_FLAG_SUSPEND)
        assert outcome is None
        await trio.sleep(16)
        assert [status_of(o) for o in idle.outcomes] == [PullStatus.NO_NEW_MSG]
        nursery.cancel_scope.cancel()


async def test_held_pulls_are_bounded_per_connection_and_in_all(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    p = Puller(tmp_path)
    p.hold.limits = HoldLimits(per_owner=2, total=3)
    async with trio.open_nursery() as nursery:
        await nursery.start(p.hold.run)
        held = [await p.pull(0, flags=PULL_FLAG_SUSPEND, owner="a") for _ in range(2)]
        assert [outcome for outcome, _ in held] == [None, None]
        refused, _ = await p.pull(0, flags=PULL_FLAG_SUSPEND, owner="a")
        assert isinstance(refused, Refusal) and refused.code == RC.SYSTEM_BUSY
        assert "maxHeldPullsPerConnection=2" in refused.remark
        assert (await p.pull(0, flags=PULL_FLAG_SUSPEND, owner="b"))[0] is None
        refused, _ = await p.pull(0, flags=PULL_FLAG_SUSPEND, owner="c")
        assert isinstance(refused, Refusal) and "maxHeldPulls=3" in refused.remark
        assert p.hold.count == 3
        # answered pulls give their places back, per connection and in all
        p.put(1)
        p.hold.notify_arrivals({("T", 0): 1})
        await trio.testing.wait_all_tasks_blocked()
        assert p.hold.count == 0
        assert all(len(reply.outcomes) == 1 for _, reply in held)
        again = [await p.pull(1, flags=PULL_FLAG_SUSPEND, owner="a") for _ in range(2)]
        assert [outcome for outcome, _ in again] == [None, None]
        nursery.cancel_scope.cancel()


async def test_a_pull_is_held_no_longer_than_the_broker_allows(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    p = Puller(tmp_path, pullSuspendMaxTimeMillis=5_000)
    async with trio.open_nursery() as nursery:
        await nursery.start(p.hold.run)
        start = trio.current_time()
        outcome, reply = await p.pull(0, flags=PULL_FLAG_SUSPEND, suspendTimeoutMillis=10**12)
        assert outcome is None
        with trio.move_on_after(60):
            while not reply.outcomes:
                await trio.sleep(0.1)
        assert reply.outcomes, "still held a minute later"
        assert status_of(reply.outcomes[0]) is PullStatus.NO_NEW_MSG
        assert 5.0 <= trio.current_time() - start <= 5.1
        nursery.cancel_scope.cancel()


class LateReads:
    """Off-loop reads that read at once but return only when released (a slow thread)."""

    def __init__(self) -> None:
        self.pending: list[trio.Event] = []

    async def __call__(self, fn: Callable[[], Any]) -> Any:
        result = fn()
        done = trio.Event()
        self.pending.append(done)
        await done.wait()
        return result

    async def release_all(self) -> None:
        await trio.testing.wait_all_tasks_blocked()
        while self.pending:
            self.pending.pop(0).set()
            await trio.testing.wait_all_tasks_blocked()


async def test_an_arrival_during_a_held_pulls_off_loop_read_is_not_missed(tmp_path: Path) -> None:
    reads = LateReads()
    p = Puller(tmp_path, reads, maxTransferBytesOnMessageInMemory=1024 * 1024)  # all off-loop
    async with trio.open_nursery() as nursery:
        await nursery.start(p.hold.run)
        pulled: list[tuple[PullOutcome | None, Reply]] = []

        async def pull_b() -> None:
            pulled.append(await p.pull(0, expr="b", flags=PULL_FLAG_SUSPEND))

        nursery.start_soon(pull_b)
        await reads.release_all()
        [(outcome, reply)] = pulled
        assert outcome is None and p.hold.count == 1
        p.put(1, tags="a")  # filtered out
        p.hold.notify_arrivals({("T", 0): 1})
        await trio.testing.wait_all_tasks_blocked()
        assert len(reads.pending) == 1  # the held pull's re-run read only saw the "a"
        p.put(1, tags="b")  # arrives while that read is still on its way back
        p.hold.notify_arrivals({("T", 0): 2})
        await reads.release_all()
        # answered now, without waiting for the held pull's deadline (the clock did not move)
        assert p.hold.count == 0
        [answer] = reply.outcomes
        assert isinstance(answer, Pulled) and answer.status is PullStatus.FOUND
        assert answer.result.message_count == 1 and answer.result.next_begin_offset == 2
        nursery.cancel_scope.cancel()


async def test_only_big_pulls_read_off_the_loop(tmp_path: Path) -> None:
    p = Puller(tmp_path, maxTransferBytesOnMessageInMemory=1024 * 1024)
    p.put(3)
    small, _ = await p.pull(0, maxMsgBytes=64 * 1024)
    assert status_of(small) is PullStatus.FOUND and p.gate.off_loop_reads == 0
    big, _ = await p.pull(0)  # may read up to 1 MiB: over the 64 KiB threshold
    assert isinstance(big, Pulled) and big.result.message_count == 3
    assert p.gate.off_loop_reads == 1
