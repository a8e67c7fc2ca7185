"""A POP whose messages are there is served without a task (pop/pop_nowait.py), on a real broker
on SimNetwork + MockClock: no task of the hold service is spawned for it, its CK goes to the
store as one request, the consumer hears nothing and the group's offset stays put until the
store answered that the CK is stored, and meanwhile another consumer of the group gets none of
those messages; a CK the store refuses hands out none of the messages and
leaves the offset where it was, and the next pop gets them."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.protocol.codes import ResponseCode
from tests.harness.broker import harness
from tests.harness.pop import simple_consumer

TOPIC, GROUP = "PopN", "PopNG"


class HeldPuts:
    """The POP processor's store writer with its puts held until released (or refused)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.held: list[tuple[Any, Any]] = []
        self.passthrough = False

    def put_nowait(self, msgs: Any, on_done: Any) -> None:
        if self.passthrough:
            self.real.put_nowait(msgs, on_done)
        else:
            self.held.append((msgs, on_done))

    async def put(self, msgs: Any, on_done: Any) -> None:
        self.put_nowait(msgs, on_done)

    def release(self) -> None:
        for msgs, on_done in self.held:
            self.real.put_nowait(msgs, on_done)
        self.held.clear()


async def until_held(writer: HeldPuts) -> None:
    with trio.fail_after(5):
        while not writer.held:
            await trio.sleep(0.001)


async def test_a_pop_with_messages_is_answered_without_a_task_once_its_ck_is_stored(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        assert h.broker is not None
        feature = h.broker.pop
        writer = HeldPuts(feature.pop.writer)
        feature.pop.writer = writer
        started: list[Any] = []
        try_start = feature.hold.try_start
        feature.hold.try_start = lambda *a: started.append(a) or try_start(*a)  # type: ignore[method-assign]
        for i in range(4):
            assert (await h.send(TOPIC, f"n{i}".encode(), queue_id=0)).code == ResponseCode.SUCCESS
        offsets = h.broker.tables.offsets
        async with simple_consumer(h, GROUP, TOPIC) as c:
            await trio.sleep(0.5)
            got: list[Any] = []

            async def receive() -> None:
                got.extend(await c.receive(32, 30.0, await_duration=0))

            # refused: nothing handed out, the offset where it was
            async with trio.open_nursery() as n:
                n.start_soon(receive)
                await until_held(writer)
                await trio.sleep(1)  # the client waits; the CK is not stored: no answer
                assert got == [] and len(writer.held) == 1
                ((msgs, on_done),) = writer.held
                assert [m.topic for m in msgs] == [h.broker.pop.pop.config.revive_topic]
                writer.held.clear()
                on_done([], PutStatus.SERVICE_NOT_AVAILABLE, "refused in this test")
            assert got == [] and offsets.query(GROUP, TOPIC, 0) <= 0
            assert started == []  # no task of the hold service
            # stored: answered only then, the offset past the messages
            async with trio.open_nursery() as n:
                n.start_soon(receive)
                await until_held(writer)
                await trio.sleep(1)
                assert got == [] and len(writer.held) == 1
                assert offsets.query(GROUP, TOPIC, 0) <= 0
                # the queue stays being popped: another consumer of the group gets none of it
                async with simple_consumer(h, GROUP, TOPIC) as other:
                    await trio.sleep(0.5)
                    assert await other.receive(32, 30.0, await_duration=0) == []
                assert len(started) == 1  # that empty pop went to the task path
                writer.release()
            assert sorted(m.body for m in got) == [b"n0", b"n1", b"n2", b"n3"]
            assert offsets.query(GROUP, TOPIC, 0) == 4
            assert len(started) == 1  # the served pop took no task
            # nothing there: the pop goes to the task path (and is answered empty)
            writer.passthrough = True
            assert await c.receive(32, 30.0, await_duration=0) == []
            assert len(started) == 2
