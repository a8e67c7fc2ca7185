"""Moving a group's offsets on a live cluster through `rocketrio admin` (in-process, SimNetwork,
MockClock): resetOffsetByTime moves a RUNNING push consumer back without a restart (the broker
persisted the new offsets before answering; consumption that was in flight at the reset cannot
move the offset forward again); skipAccumulatedMessage makes a lagging group's lag 0; with no
member online the admin sets the offsets itself (upstream's old way); cloneGroupOffset copies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.api import PullResult, PullStatus
from rocketrio.actors.client.consumer_core import QueueState
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.offset_store import RemoteBrokerOffsetStore
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.pull_consumer import LitePullConsumer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.client.subscription import build_subscription
from rocketrio.protocol.bodies import ConsumerOffsetSerializeWrapper, MessageQueue
from rocketrio.protocol.message import MessageExt
from rocketrio.protocol.serde import from_json
from tests.harness.admin_cli import Capture, admin, client_kwargs
from tests.harness.replication import Cluster, Node, cluster, wait_until
from tests.harness.sim_network import SimNetwork

NEVER_FLUSH_MS = 3_600_000  # only an explicit persist writes consumerOffset.json
WAIT_S = 60


async def _broker(c: Cluster) -> Node:
    node = await (await c.node().start(flushConsumerOffsetInterval=NEVER_FLUSH_MS)).wait_role()

    async def registered() -> bool:
        return bool(await c.namesrv_ids())

    await wait_until(registered, "broker registered")
    return node


def _persisted(node: Node, topic: str, group: str) -> dict[int, int]:
    """consumerOffset.json as it is on disk."""
    data = (Path(node.root) / "config" / "consumerOffset.json").read_bytes()
    return from_json(ConsumerOffsetSerializeWrapper, data).offsetTable.get(f"{topic}@{group}", {})


async def _topic(c: Cluster, queues: int) -> None:
    async with MQAdmin(c.namesrv_addr, c.net.transport("10.0.9.6")) as mq:
        await mq.update_topic(
            "T", cluster="DefaultCluster", read_queues=queues, write_queues=queues
        )
        await wait_for_route(mq, "T")


async def _send(c: Cluster, bodies: list[str], gap_s: float = 0.0) -> None:
    async with Producer("pg", c.namesrv_addr, **client_kwargs(c, "10.0.9.8", "p")) as p:
        for b in bodies:
            await p.send(Message("T", b.encode()))
            if gap_s:
                await trio.sleep(gap_s)


async def _progress(capsys: Capture, c: Cluster, group: str) -> dict[int, tuple[int, int]]:
    """consumerProgress --json: queue id -> (broker offset, consumer offset) on topic T."""
    code, out, err = await admin(capsys, c, "consumerProgress", "-n", c.namesrv_addr, "-g", group)
    assert code == 0, err
    code, out, err = await admin(
        capsys, c, "consumerProgress", "-n", c.namesrv_addr, "-g", group, "-t", "T", "--json"
    )
    assert code == 0, err
    rows = json.loads(out)["offsets"]
    return {r["queueId"]: (r["brokerOffset"], r["consumerOffset"]) for r in rows}


async def _until(check: Any, what: str) -> None:
    with trio.fail_after(WAIT_S):
        while not check():
            await trio.sleep(0.1)


async def test_reset_by_time_moves_a_running_consumer_back(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 41) as c:
        node = await _broker(c)
        await _topic(c, 1)
        await _send(c, [f"m{i}" for i in range(10)], gap_s=1.0)
        got: list[str] = []
        stored: dict[str, int] = {}
        hold = False
        blocked: list[trio.Event] = []

        async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
            if hold:
                ev = trio.Event()
                blocked.append(ev)
                await ev.wait()
            for m in msgs:
                got.append(m.body.decode())
                stored[m.body.decode()] = m.store_timestamp
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "G",
            c.namesrv_addr,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            **client_kwargs(c, "10.0.9.9", "c"),
        )
        consumer.subscribe("T")
        consumer.register_listener(listener)
        async with consumer:
            await _until(lambda: len(got) == 10, "first pass consumed")
            # m10 is being consumed (held) when the reset comes
            hold = True
            await _send(c, ["m10"])
            await _until(lambda: len(blocked) == 1, "m10 in flight")
            n_before = len(got)

            code, out, err = await admin(
                capsys, c, "resetOffsetByTime", "-n", c.namesrv_addr, "-g", "G", "-t", "T",
                "-s", str(stored["m5"]),
            )  # fmt: skip
            assert code == 0, err
            assert "#brokerName" in out and "broker-a" in out
            assert [ln.split() for ln in out.splitlines() if ln.startswith("broker-a")] == [
                ["broker-a", "0", "5"]
            ]
            # the answer means "on disk"
            assert _persisted(node, "T", "G") == {0: 5}

            # the consumer restarts the queue at 5 (no restart of the consumer): m5.. again
            await _until(lambda: len(blocked) >= 2, "re-pulled from 5")
            mq = MessageQueue("T", "broker-a", 0)
            assert consumer.offset_store is not None
            # the consumption of m10 that was in flight at the reset finishes now: it must not
            # move the offset past what the reset asked for
            blocked[0].set()
            await trio.sleep(6)  # the client's persist interval passes
            assert consumer.offset_store.table.read(mq) == 5
            assert (await _progress(capsys, c, "G"))[0] == (11, 5)

            hold = False
            for ev in blocked:
                ev.set()
            await _until(lambda: got.count("m5") == 2 and got.count("m10") >= 2, "re-consumed")
            again = got[n_before:]
            assert {f"m{i}" for i in range(5, 11)} <= set(again)
            assert not {f"m{i}" for i in range(5)} & set(again)  # nothing before the time
            await trio.sleep(6)
            assert (await _progress(capsys, c, "G"))[0] == (11, 11)


async def test_skip_accumulated_fallback_and_clone(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 42) as c:
        node = await _broker(c)
        ns = c.namesrv_addr
        await _topic(c, 2)
        blocked: list[trio.Event] = []

        async def stuck(msgs: list[MessageExt]) -> ConsumeStatus:
            ev = trio.Event()
            blocked.append(ev)
            await ev.wait()
            return ConsumeStatus.CONSUME_SUCCESS

        # a lagging group: its only member is stuck on its first messages
        await _send(c, [f"a{i}" for i in range(4)])
        consumer = PushConsumer(
            "L",
            ns,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            **client_kwargs(c, "10.0.9.9", "l"),
        )
        consumer.subscribe("T")
        consumer.register_listener(stuck)
        async with consumer:
            await _until(lambda: len(blocked) >= 4, "stuck")
            await _send(c, [f"b{i}" for i in range(6)])
            before = await _progress(capsys, c, "L")
            assert sum(b - o for b, o in before.values()) == 10

            code, out, err = await admin(
                capsys, c, "skipAccumulatedMessage", "-n", ns, "-g", "L", "-t", "T"
            )
            assert code == 0, err
            rows = [ln.split() for ln in out.splitlines() if ln.startswith("broker-a")]
            assert rows == [["broker-a", str(q), str(before[q][0])] for q in (0, 1)]
            assert _persisted(node, "T", "L") == {q: before[q][0] for q in (0, 1)}
            for ev in blocked:  # the stuck consumption ends after the skip
                ev.set()
            await trio.sleep(6)
            after = await _progress(capsys, c, "L")
            assert after == {q: (before[q][0], before[q][0]) for q in (0, 1)}

        # no member online: the admin sets the offsets itself (upstream's old way)
        code, out, err = await admin(
            capsys, c, "resetOffsetByTime", "-n", ns, "-g", "L", "-t", "T", "-s", "0"
        )
        assert code == 0, err
        assert "no consumer online at broker-a" in out and "#rollbackOffset" in out
        assert await _progress(capsys, c, "L") == {q: (before[q][0], 0) for q in (0, 1)}

        # cloneGroupOffset: L's offsets become M's
        code, out, err = await admin(
            capsys, c, "skipAccumulatedMessage", "-n", ns, "-g", "L", "-t", "T"
        )
        assert code == 0, err
        code, out, err = await admin(
            capsys, c, "cloneGroupOffset", "-n", ns, "-s", "L", "-d", "M", "-t", "T", "-o", "true"
        )
        assert code == 0, err
        assert "clone group offset success" in out
        assert [ln.split() for ln in out.splitlines() if ln.startswith("broker-a")] == [
            ["broker-a", str(q), str(before[q][0])] for q in (0, 1)
        ]
        assert _persisted(node, "T", "M") == {q: before[q][0] for q in (0, 1)}


async def test_a_pull_answered_for_a_restarted_queue_changes_nothing() -> None:
    """A pull whose answer was already on its way when the reset restarted the queue (the
    old QueueState, its ProcessQueue dropped) must not move the offset or the pull position:
    without the guard, an empty answer's nextBeginOffset would be committed (correctTagsOffset)
    over the reset offset."""
    consumer = PushConsumer("G", "10.0.1.1:9876", transport=SimNetwork(1).transport("10.0.9.5"))
    consumer.offset_store = RemoteBrokerOffsetStore(consumer.client, "G")
    mq = MessageQueue("T", "broker-a", 0)
    old = QueueState(mq=mq, sub=build_subscription("T", "*", 0), next_offset=11)
    old.pq.dropped = True
    consumer.offset_store.table.update(mq, 5, increase_only=False)  # what the reset set
    for status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG, PullStatus.OFFSET_ILLEGAL):
        await consumer._on_pull_result(old, PullResult(status, 11, 0, 11, 0, b""))
        assert consumer.offset_store.table.read(mq) == 5, status


async def test_lite_pull_consumer_cplus_body_and_one_queue(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    """A lite pull consumer is moved too; ``-c`` makes the broker push the C++ list body, which
    our client reads as well; ``-b -q -o`` moves one queue; ``-q`` without ``-b`` is usage."""
    async with cluster(tmp_path, 43) as c:
        node = await _broker(c)
        ns = c.namesrv_addr
        await _topic(c, 1)
        await _send(c, [f"m{i}" for i in range(6)], gap_s=1.0)
        consumer = LitePullConsumer(
            "P",
            ns,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            **client_kwargs(c, "10.0.9.9", "lp"),
        )
        consumer.subscribe("T")
        polled: list[MessageExt] = []
        async with consumer:
            with trio.fail_after(WAIT_S):
                while len(polled) < 6:
                    polled += await consumer.poll(1.0)
            await consumer.commit()
            ts = {m.body.decode(): m.store_timestamp for m in polled}

            code, out, err = await admin(
                capsys, c, "resetOffsetByTime", "-n", ns, "-g", "P", "-t", "T",
                "-s", str(ts["m2"]), "-c",
            )  # fmt: skip
            assert code == 0, err
            assert _persisted(node, "T", "P") == {0: 2}
            again: list[str] = []
            with trio.fail_after(WAIT_S):
                while len(again) < 4:
                    again += [m.body.decode() for m in await consumer.poll(1.0)]
            assert again == ["m2", "m3", "m4", "m5"]

            addr = node.b.addr
            code, out, err = await admin(
                capsys, c, "resetOffsetByTime", "-n", ns, "-g", "P", "-t", "T", "-s", "0",
                "-b", addr, "-q", "0", "-o", "4",
            )  # fmt: skip
            assert code == 0, err
            assert [ln.split() for ln in out.splitlines() if ln.startswith("broker-a")] == [
                ["broker-a", "0", "4"]
            ]
            assert _persisted(node, "T", "P") == {0: 4}
            with trio.fail_after(WAIT_S):
                while "m4" not in again[4:]:
                    again += [m.body.decode() for m in await consumer.poll(1.0)]
            assert again[4:6] == ["m4", "m5"]

        code, out, err = await admin(
            capsys, c, "resetOffsetByTime", "-n", ns, "-g", "P", "-t", "T", "-s", "0", "-q", "0"
        )
        assert code == 2 and "need -b/--broker" in err
