"""The POP probes on SimNetwork + MockClock, as upstream's proxy sends them: PEEK_MESSAGE reads
without popping (the same messages again, then a POP still gets them); NOTIFICATION answers at
once when the group has a message, is held and answered hasMsg=true on an arrival (of the topic,
or of its pop retry topic) or hasMsg=false at bornTime + pollTime, is bounded by
maxPopPollingSize and answered at shutdown; POLLING_INFO counts the POPs held per (topic, group,
queueId). Bad input gets upstream's codes."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.broker import BrokerHarness, harness
from tests.harness.clock import now_ms

TOPIC = "ProbeT"
GROUP = "ProbeG"


async def send_n(h: BrokerHarness, n: int, queue_id: int, prefix: str = "m") -> None:
    for i in range(n):
        r = await h.send(TOPIC, f"{prefix}{i}".encode(), queue_id=queue_id)
        assert r.code == ResponseCode.SUCCESS


def request(code: int, **kw: Any) -> RemotingCommand:
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "1"}
    ext.update({k: str(v) for k, v in kw.items()})
    return RemotingCommand(code, ext_fields=ext)


def peek(**kw: Any) -> RemotingCommand:
    return request(RequestCode.PEEK_MESSAGE, **{"maxMsgNums": 32, **kw})


def notification(poll_ms: int, **kw: Any) -> RemotingCommand:
    return request(RequestCode.NOTIFICATION, pollTime=poll_ms, bornTime=now_ms(), **kw)


def pop(poll_ms: int = 0, **kw: Any) -> RemotingCommand:
    return request(
        RequestCode.POP_MESSAGE,
        **{
            "maxMsgNums": 32,
            "invisibleTime": 60_000,
            "pollTime": poll_ms,
            "bornTime": now_ms(),
            "initMode": 0,
            **kw,
        },
    )


async def polling_num(h: BrokerHarness, queue_id: int) -> int:
    resp = await h.invoke(request(RequestCode.POLLING_INFO, queueId=queue_id))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return int(resp.ext_fields["pollingNum"])


def bodies(resp: RemotingCommand) -> list[bytes]:
    return [m.body for m in iter_stored(resp.body or b"")]


async def test_peek_reads_without_popping(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await send_n(h, 3, queue_id=1)
        for _ in range(2):  # nothing moved: the same messages again
            resp = await h.invoke(peek())
            assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, "FOUND")
            assert bodies(resp) == [b"m0", b"m1", b"m2"]
            ext = resp.ext_fields
            assert ext["restNum"] == "3" and ext["popTime"] == "0" and ext["reviveQid"] == "0"
        two = await h.invoke(peek(queueId=-1, maxMsgNums=2))  # every queue, at most 2
        assert bodies(two) == [b"m0", b"m1"]
        popped = await h.invoke(pop())  # the peeks left them to pop
        assert popped.code == ResponseCode.SUCCESS
        assert bodies(popped) == [b"m0", b"m1", b"m2"]
        empty = await h.invoke(peek())
        assert (empty.code, empty.remark) == (ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE")
        assert empty.ext_fields["restNum"] == "0" and not empty.body


async def test_bad_probes_get_upstreams_codes(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, autoCreateSubscriptionGroup=False) as h:
        await send_n(h, 1, queue_id=0)
        for make in (peek, lambda **kw: notification(0, **kw)):
            no_topic = await h.invoke(make(topic="NoSuchTopic"))
            assert no_topic.code == ResponseCode.TOPIC_NOT_EXIST
            assert "topic[NoSuchTopic] not exist" in no_topic.remark
            bad_queue = await h.invoke(make(queueId=99))
            assert bad_queue.code == ResponseCode.SYSTEM_ERROR
            assert bad_queue.remark.startswith("queueId[99] is illegal, topic:[ProbeT]")
            no_group = await h.invoke(make())
            assert no_group.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            assert "subscription group [ProbeG] does not exist" in no_group.remark
        info = await h.invoke(request(RequestCode.POLLING_INFO, topic="NoSuchTopic"))
        assert info.code == ResponseCode.TOPIC_NOT_EXIST
        missing = RemotingCommand(RequestCode.NOTIFICATION, ext_fields={"topic": TOPIC})
        resp = await h.invoke(missing)  # a required header field missing
        assert resp.code != ResponseCode.SUCCESS and "consumerGroup" in resp.remark


async def test_notification_at_once_and_held_until_arrival(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await send_n(h, 1, queue_id=0)  # the topic; queue 1 stays empty
        now = await h.invoke(notification(0))
        assert now.code == ResponseCode.SUCCESS and now.ext_fields["hasMsg"] == "false"
        answers: list[tuple[float, RemotingCommand]] = []

        async def held() -> None:
            resp = await h.invoke(notification(20_000))
            answers.append((trio.current_time(), resp))

        async with trio.open_nursery() as n:
            n.start_soon(held)
            await trio.sleep(3)
            assert answers == []  # held: nothing there
            sent_at = trio.current_time()
            await send_n(h, 1, queue_id=1)
        [(at, resp)] = answers
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["hasMsg"] == "true"
        assert at - sent_at < 1  # woken by the arrival, not by its deadline
        again = await h.invoke(notification(20_000))  # the message is there: at once
        assert again.ext_fields["hasMsg"] == "true"
        other = await h.invoke(notification(0, queueId=2))  # another queue has none
        assert other.ext_fields["hasMsg"] == "false"


async def test_notification_held_answered_false_at_its_deadline(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await send_n(h, 1, queue_id=0)  # another queue's message does not answer it
        born = now_ms()
        resp = await h.invoke(notification(5_000))
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["hasMsg"] == "false"
        assert born + 5_000 <= now_ms() < born + 6_000  # at bornTime + pollTime
        # a bornTime already pollTime old: answered at once
        late = request(RequestCode.NOTIFICATION, pollTime=1_000, bornTime=now_ms() - 2_000)
        start = trio.current_time()
        assert (await h.invoke(late)).ext_fields["hasMsg"] == "false"
        assert trio.current_time() - start < 0.5  # a round trip, not a hold


async def test_notification_bounded_and_answered_at_shutdown(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, maxPopPollingSize=1) as h:
        await send_n(h, 1, queue_id=0)  # the topic; queue 1 stays empty
        answers: list[str] = []

        async def held() -> None:
            resp = await h.invoke(notification(60_000))
            assert trio.current_time() < 30  # at shutdown, not at its deadline
            answers.append(resp.ext_fields["hasMsg"])

        async with trio.open_nursery() as n:
            n.start_soon(held)
            await trio.sleep(1)
            start = trio.current_time()
            full = await h.invoke(notification(60_000))  # one held already: answered now
            assert full.ext_fields["hasMsg"] == "false" and trio.current_time() - start < 0.5
            await h.stop_broker()
        assert answers == ["false"]


async def test_polling_info_counts_held_pops(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await h.send(TOPIC, b"create", queue_id=0)
        assert (await h.invoke(pop(queueId=0))).code == ResponseCode.SUCCESS
        assert await polling_num(h, 1) == 0
        popped: list[list[bytes]] = []

        async def held_pop() -> None:
            popped.append(bodies(await h.invoke(pop(20_000))))

        async with trio.open_nursery() as n:
            n.start_soon(held_pop)
            n.start_soon(held_pop)
            await trio.sleep(1)
            assert await polling_num(h, 1) == 2
            assert await polling_num(h, 0) == 0 and await polling_num(h, -1) == 0
            # a held NOTIFICATION is not a held POP (upstream keeps them apart)
            n.start_soon(h.invoke, notification(20_000, queueId=0))
            await trio.sleep(1)
            assert await polling_num(h, 0) == 0
            await send_n(h, 1, queue_id=1)
            await trio.sleep(1)
            assert await polling_num(h, 1) == 1  # one pop took it, the other is held
            await send_n(h, 1, queue_id=0)  # answers the notification
            await send_n(h, 1, queue_id=1, prefix="n")
        assert sorted(popped) == [[b"m0"], [b"n0"]]
        assert await polling_num(h, 1) == 0


async def test_ordered_notification_waits_for_the_block_to_end(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await send_n(h, 2, queue_id=1)
        popped_at = trio.current_time()
        first = await h.invoke(pop(order="true", maxMsgNums=1, invisibleTime=3_000))
        assert bodies(first) == [b"m0"]  # the queue is blocked for 3 s
        plain = await h.invoke(notification(0))  # an unordered request sees m1
        assert plain.ext_fields["hasMsg"] == "true"
        resp = await h.invoke(notification(20_000, order="true"))  # blocked: held
        assert resp.ext_fields["hasMsg"] == "true"
        # answered at the block's end (the order service's wake-up), not at its pollTime
        assert 2.9 <= trio.current_time() - popped_at < 5
