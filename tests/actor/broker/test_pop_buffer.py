"""The POP buffer (``enablePopBufferMerge``, pop/buffer_merge.py) on a real broker, SimNetwork +
MockClock: pops all acknowledged write nothing to the revive log and their offset moves; a pop
not all acknowledged is written once it stayed popCkStayBufferTime (the CK, then its ACKs as one
``bAck``), and its unacknowledged messages come back at their invisible time, not before, the
acknowledged never; a changed invisible time; a held pop answered on arrival; and a kill -9
before a pop is done: its messages are popped again at once (nothing lost, the acknowledged
ones delivered once more, the buffer's documented price); popProgress counts the buffer's
messages in flight."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import FlushDiskType
from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.pop_admin import pop_progress
from rocketrio.actors.client.simple_consumer import ReceivedMessage
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.broker import BrokerHarness, harness
from tests.harness.pop import receive_all, revive_records, simple_consumer

TOPIC, GROUP = "PopBufT", "PopBufG"
ON = {"enablePopBufferMerge": True}


def simple(h: BrokerHarness) -> Any:
    return simple_consumer(h, GROUP, TOPIC)


async def send_n(h: BrokerHarness, n: int) -> None:
    for i in range(n):
        r = await h.send(TOPIC, f"m{i}".encode(), queue_id=0)
        assert r.code == ResponseCode.SUCCESS


def bodies(msgs: list[ReceivedMessage]) -> list[bytes]:
    return sorted(m.body for m in msgs)


def committed(h: BrokerHarness) -> int:
    assert h.broker is not None
    return h.broker.tables.offsets.query(GROUP, TOPIC, 0)


async def test_pops_all_acknowledged_write_nothing_and_move_the_offset(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **ON) as h, simple(h) as c:
        assert h.broker is not None and h.broker.pop.buffer is not None
        await send_n(h, 40)
        got = await receive_all(c, invisible=60.0)
        assert bodies(got) == bodies_of(40)
        assert committed(h) <= 0  # held back while the CKs are only in memory
        for m in got:
            await c.ack(m)
        await trio.sleep(0.2)  # a few buffer rounds
        assert committed(h) == 40
        assert revive_records(h) == []  # no CK, no ACK: nothing written
        assert h.broker.pop.buffer.dropped == 2  # two pops of 32 and 8
        await trio.sleep(90)
        assert await receive_all(c, invisible=60.0) == []  # nothing revived
        assert revive_records(h) == []


def bodies_of(n: int) -> list[bytes]:
    return sorted(f"m{i}".encode() for i in range(n))


async def test_a_pop_not_all_acknowledged_is_written_and_revived_at_its_invisible_time(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **ON) as h, simple(h) as c:
        await send_n(h, 6)
        got = {m.body: m for m in await receive_all(c, invisible=20.0)}
        popped_at = trio.current_time()
        for b in (b"m0", b"m2", b"m4"):
            await c.ack(got[b])
        await trio.sleep(9.5 - (trio.current_time() - popped_at))
        assert revive_records(h) == [] and committed(h) <= 0  # still only in memory
        await trio.sleep(1.0)  # popCkStayBufferTime (10 s) passed: the CK, then its ACKs
        tags = revive_records(h)
        assert [t for t, _ in tags] == ["ck", "bAck"], tags
        assert sorted(tags[1][1]["aol"]) == [0, 2, 4]
        assert committed(h) == 6  # the CK is stored: the offset may pass it
        await c.ack(got[b"m1"])  # after the CK was written: an ACK record of its own
        assert [t for t, _ in revive_records(h)] == ["ck", "bAck", "ack"]
        assert await receive_all(c, invisible=20.0) == []  # nothing before its invisible time
        await trio.sleep(20.0 - (trio.current_time() - popped_at) + 1.5)
        back = await receive_all(c, invisible=20.0)
        assert bodies(back) == [b"m3", b"m5"]
        assert all(m.delivery_attempt == 2 for m in back)


async def test_a_changed_invisible_time_of_a_buffered_message(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **ON) as h, simple(h) as c:
        await send_n(h, 2)
        got = sorted(await receive_all(c, invisible=20.0), key=lambda m: m.body)
        await c.change_invisible_duration(got[0], 60.0)  # its bit set in the buffer
        await c.ack(got[1])
        await trio.sleep(0.2)
        assert [t for t, _ in revive_records(h)] == ["ck"]  # the new CK only
        assert committed(h) == 2  # the old CK was done: dropped, its offset passed
        await trio.sleep(30)
        assert await receive_all(c, invisible=20.0) == []  # not at the old 20 s
        await trio.sleep(35)
        back = await receive_all(c, invisible=20.0)
        assert bodies(back) == [b"m0"]


async def test_a_held_pop_answered_on_arrival_goes_through_the_buffer(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **ON) as h, simple(h) as c:
        await send_n(h, 1)  # the topic made, its message popped and acknowledged
        [first] = await receive_all(c, invisible=60.0)
        await c.ack(first)
        got: list[ReceivedMessage] = []

        async def held() -> None:
            got.extend(await c.receive(32, 60.0, await_duration=20))

        async with trio.open_nursery() as n:
            n.start_soon(held)
            await trio.sleep(2)
            assert committed(h) == 1
            await send_n(h, 3)
        assert bodies(got)[0] == b"m0"  # answered on the first arrival (the task path)
        got += await receive_all(c, invisible=60.0)
        assert bodies(got) == [b"m0", b"m1", b"m2"]
        assert committed(h) == 1
        for m in got:
            await c.ack(m)
        await trio.sleep(0.2)
        assert committed(h) == 4 and revive_records(h) == []


async def test_a_kill_before_a_pop_is_done_pops_its_messages_again_at_once(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """What reached the disk decides: no CK and no offset past the pop, so after a kill -9 the
    restarted broker hands every message out again, without waiting for an invisible time."""
    sync = {**ON, "flushDiskType": FlushDiskType.SYNC_FLUSH}
    async with harness(tmp_path, **sync) as h:
        async with simple(h) as c:
            await send_n(h, 4)
            got = {m.body: m for m in await receive_all(c, invisible=60.0)}
            await c.ack(got[b"m0"])
            await c.ack(got[b"m1"])
            await trio.sleep(6)  # consumerOffset.json written (flushConsumerOffsetInterval)
        await h.crash_broker()
        path = tmp_path / "store" / "config" / "consumerOffset.json"
        table = json.loads(path.read_text())["offsetTable"] if path.exists() else {}
        assert table.get(f"{TOPIC}@{GROUP}", {}).get("0", 0) == 0  # on disk: not past them
        await h.start_broker(**sync)
        async with simple(h) as c:
            back = await receive_all(c, invisible=60.0)
            assert bodies(back) == bodies_of(4)  # at once: the acknowledged two once more
            for m in back:
                await c.ack(m)
            await trio.sleep(0.2)
            assert committed(h) == 4


async def test_a_pops_skip_past_filtered_messages_waits_behind_a_buffered_pop(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """A pop's own offset move (messages its filter skipped) must not pass a buffered pop's
    messages either: it is queued behind that pop's entry."""
    async with harness(tmp_path, **ON) as h:
        assert (await h.send(TOPIC, b"a0", queue_id=0, tags="A")).code == ResponseCode.SUCCESS
        async with simple(h) as c:
            c.subscribe(TOPIC, "A")
            [first] = await receive_all(c, invisible=60.0)
            for i in range(2):
                await h.send(TOPIC, f"b{i}".encode(), queue_id=0, tags="B")
            assert await receive_all(c, invisible=60.0) == []  # skipped: no A behind it
            await trio.sleep(0.2)
            assert committed(h) <= 0  # the skip waits behind the unacknowledged pop
            assert h.broker is not None and h.broker.pop.buffer is not None
            assert h.broker.pop.buffer.latest(TOPIC, GROUP, 0) == 3
            await c.ack(first)
            await trio.sleep(0.2)
            assert committed(h) == 3


async def test_a_pop_declined_half_way_takes_back_what_the_buffer_kept(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """The pop without a task reads queue by queue; when a later read would wait it hands the
    pop to the task path, which reads again from the group's offsets: the CKs the buffer took
    for the earlier queues are taken back, so the task path finds their messages again."""
    async with harness(tmp_path, **ON) as h, simple(h) as c:
        for q in range(2):
            r = await h.send(TOPIC, f"q{q}".encode(), queue_id=q)
            assert r.code == ResponseCode.SUCCESS
        assert h.broker is not None
        store = h.broker.pop.pop.store
        real = store.read_nowait
        reads: list[int] = []

        def read_nowait(*a: Any, **kw: Any) -> Any:
            found = [n for n in reads if n]
            if found:  # the read after one that found messages would wait
                return None
            result = real(*a, **kw)
            reads.append(result.message_count if result is not None else 0)
            return result

        store.read_nowait = read_nowait  # type: ignore[method-assign]
        got = await c.receive(32, 60.0, await_duration=0)
        store.read_nowait = real  # type: ignore[method-assign]
        assert sum(reads) == 1  # one queue was read and buffered before the decline
        got += await receive_all(c, invisible=60.0)
        assert bodies(got) == [b"q0", b"q1"]  # each once, none skipped
        buffer = h.broker.pop.buffer
        assert buffer is not None and len(buffer.cks) == len({m.queue_id for m in got})


async def test_a_batch_ack_of_buffered_pops_writes_nothing(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **ON) as h, simple(h) as c:
        await send_n(h, 5)
        got = await receive_all(c, invisible=60.0)
        await c.ack_batch(got[:4])  # BATCH_ACK_MESSAGE: the bits set in memory
        await trio.sleep(0.2)
        assert revive_records(h) == [] and committed(h) <= 0
        await c.ack_batch(got[4:])
        await trio.sleep(0.2)
        assert revive_records(h) == [] and committed(h) == 5


async def test_a_notification_reads_the_offset_the_buffer_holds_back(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """NOTIFICATION (and PEEK) look from where the next pop reads, as upstream's getPopOffset
    reads PopBufferMergeService's latest offset: a queue popped to its end has nothing."""
    async with harness(tmp_path, **ON) as h, simple(h) as c:
        await send_n(h, 3)
        assert len(await receive_all(c, invisible=60.0)) == 3
        assert committed(h) <= 0  # the committed offset is still before them
        ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "pollTime": "0"}
        resp = await h.invoke(RemotingCommand(RequestCode.NOTIFICATION, ext_fields=ext))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert resp.ext_fields["hasMsg"] == "false"
        peek = {**ext, "maxMsgNums": "32"}
        resp = await h.invoke(RemotingCommand(RequestCode.PEEK_MESSAGE, ext_fields=peek))
        assert resp.code == ResponseCode.PULL_NOT_FOUND


class _Refusing:
    """A store writer that refuses every put (the store full, stopped ...)."""

    def put_nowait(self, msgs: Any, on_done: Any) -> None:
        on_done([], PutStatus.SERVICE_NOT_AVAILABLE, "refused in this test")

    async def put(self, msgs: Any, on_done: Any) -> None:
        self.put_nowait(msgs, on_done)


async def test_a_change_whose_new_ck_is_refused_leaves_the_message_to_its_old_ck(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """The old CK's bit is set only once the new CK is stored: a refused change must not leave
    the message with no CK at all (its old one dropped as all acknowledged)."""
    async with harness(tmp_path, **ON) as h, simple(h) as c:
        assert h.broker is not None
        await send_n(h, 2)
        got = sorted(await receive_all(c, invisible=20.0), key=lambda m: m.body)
        acks = h.broker.pop.acks
        writer, acks.writer = acks.writer, _Refusing()  # type: ignore[assignment]
        with contextlib.suppress(Exception):  # refused: the client hears it
            await c.change_invisible_duration(got[0], 60.0)
        acks.writer = writer
        await c.ack(got[1])
        await trio.sleep(22.0)  # the old CK written at 10 s, due at 20 s
        back = await receive_all(c, invisible=20.0)
        assert bodies(back) == [b"m0"]


async def test_a_change_stored_after_the_old_ck_was_written_acks_it_in_the_revive_log(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **ON) as h, simple(h) as c:
        assert h.broker is not None
        await send_n(h, 1)
        [m] = await receive_all(c, invisible=20.0)
        acks = h.broker.pop.acks
        held: list[tuple[Any, Any]] = []

        class Held:
            def put_nowait(self, msgs: Any, on_done: Any) -> None:
                held.append((msgs, on_done))

            async def put(self, msgs: Any, on_done: Any) -> None:
                self.put_nowait(msgs, on_done)

        writer, acks.writer = acks.writer, Held()  # type: ignore[assignment]

        async def change() -> None:
            with contextlib.suppress(Exception):  # the client gives up; the broker goes on
                await c.change_invisible_duration(m, 60.0)

        async with trio.open_nursery() as n:
            n.start_soon(change)
            await trio.sleep(10.5)  # meanwhile the old CK stayed 10 s: written by the buffer
            assert [t for t, _ in revive_records(h)] == ["ck"]
            acks.writer = writer
            [(msgs, on_done)] = held
            writer.put_nowait(msgs, on_done)  # the new CK stored now
        await trio.sleep(0.2)
        assert sorted(t for t, _ in revive_records(h)) == ["ack", "ck", "ck"]
        await trio.sleep(20.0)  # past the old revive time: the old CK is acknowledged
        assert await receive_all(c, invisible=20.0) == []
        await trio.sleep(35.0)  # the new one's
        assert bodies(await receive_all(c, invisible=20.0)) == [b"m0"]


async def test_a_graceful_restart_writes_the_buffer_out_first(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """Shutdown writes every CK still in memory and its ACKs and moves the offset past them
    before the offsets are persisted: after the restart nothing comes back early, the
    unacknowledged message at its invisible time, the acknowledged never."""
    async with harness(tmp_path, **ON) as h:
        async with simple(h) as c:
            await send_n(h, 3)
            got = {m.body: m for m in await receive_all(c, invisible=30.0)}
            await c.ack(got[b"m0"])
            await c.ack(got[b"m1"])
            popped_at = trio.current_time()
            assert revive_records(h) == []  # still in memory
        await h.stop_broker()
        await h.start_broker(**ON)
        assert sorted(t for t, _ in revive_records(h)) == ["bAck", "ck"]
        assert committed(h) == 3
        async with simple(h) as c:
            assert await receive_all(c, invisible=30.0) == []  # nothing early
            await trio.sleep(30.0 - (trio.current_time() - popped_at) + 2.0)
            back = await receive_all(c, invisible=30.0)
            assert bodies(back) == [b"m2"]


async def test_pop_progress_counts_the_buffers_messages_in_flight(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """`rocketrio admin popProgress` (GET_POP_INFLIGHT) counts a pop whose CK is only in the
    buffer: its unacknowledged messages are in flight, before and after the CK is written."""
    async with harness(tmp_path, **ON) as h, simple(h) as c:
        await send_n(h, 5)
        got = await receive_all(c, invisible=60.0)
        await c.ack(got[0])
        async with MQAdmin(h.namesrv_addr, h.net.transport("10.0.0.250")) as admin:
            await trio.sleep(1.5)  # a revive scan: it has nothing to read
            assert revive_records(h) == []
            prog = await pop_progress(admin, GROUP, TOPIC)
            [q0] = [q for q in prog.queues if q.queueId == 0]
            assert q0.inflight == 4 and prog.total_inflight == 4
            await c.ack(got[1])
            assert (await pop_progress(admin, GROUP, TOPIC)).total_inflight == 3
            await trio.sleep(12)  # stayed popCkStayBufferTime: the CK and its ACKs written
            assert sorted(t for t, _ in revive_records(h)) == ["bAck", "ck"]
            assert (await pop_progress(admin, GROUP, TOPIC)).total_inflight == 3
