"""The SQL92 filter bit-map on a real broker (SimNetwork + MockClock, docs/sql92-filter.md):
with enableCalcFilterBitMap and enableConsumeQueueExt the heartbeat filters are evaluated at
dispatch and their bits stored with the ConsumeQueue entries; pulls and POPs skip the records a
map rejects, a filter registered after records were dispatched judges those records the slow
way (it has no bits there), and the filters of a group gone for filterDataCleanTimeSpan are
dropped while a returning group filters again."""

from __future__ import annotations

from typing import Any

import trio

from rocketrio.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import UnregisterClientRequestHeader
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.pop_headers import PopMessageRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext, to_json
from tests.harness.broker import BrokerHarness, harness

T = "SqlBits"

BITMAP = {
    "enablePropertyFilter": True,
    "enableCalcFilterBitMap": True,
    "enableConsumeQueueExt": True,
}


def bodies(resp: RemotingCommand) -> list[bytes]:
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return [m.body for m in iter_stored(resp.body)]


async def send_numbered(h: BrokerHarness, n: int) -> None:
    for i in range(n):
        props = {"a": str(i)} if i % 4 != 3 else {}  # every 4th: no "a"
        r = await h.send(T, f"m{i}".encode(), props=props, queue_id=0)
        assert r.code == ResponseCode.SUCCESS


def heartbeat(sql: str, version: int, group: str = "CG") -> RemotingCommand:
    sub = SubscriptionData(topic=T, subString=sql, subVersion=version, expressionType="SQL92")
    data = HeartbeatData(
        clientID="c1",
        consumerDataSet=[ConsumerData(groupName=group, subscriptionDataSet=[sub])],
    )
    return RemotingCommand(RequestCode.HEART_BEAT, body=to_json(data))


def numbered(n: int, keep: Any) -> list[bytes]:
    """The bodies `send_numbered` sent whose property ``a`` (None: missing) ``keep`` accepts."""
    return [f"m{i}".encode() for i in range(n) if keep(None if i % 4 == 3 else i)]


def by_bitmap(h: BrokerHarness, group: str, offset: int = 0) -> list[bytes]:
    """What the store alone hands out for the group's filter: the records its bits may match."""
    manager = h.broker.filters.manager
    data = manager.registered(T, group)
    assert data is not None
    store = h.broker.store.message_store
    res = store.get_messages(T, 0, offset, 1000, 1 << 30, manager.probe(data))
    return [m.body for m in iter_stored(res.body)] if res.buffers else []


async def pull_as(h: BrokerHarness, offset: int = 0, group: str = "CG") -> list[bytes]:
    header = h.pull_header(T, 0, offset, sub=None, flags=0)
    header.consumerGroup = group
    return bodies(
        await h.invoke(RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=to_ext(header)))
    )


async def test_pulls_skip_what_the_bit_map_rejects(tmp_path: Any, mock_clock: Any) -> None:
    async with harness(tmp_path, **BITMAP) as h:
        assert (await h.invoke(heartbeat("a BETWEEN 4 AND 9", 1))).code == ResponseCode.SUCCESS
        await trio.sleep(2)  # the filter feature's sweep registers the heartbeat's filter
        await send_numbered(h, 40)
        want = numbered(40, lambda a: a is not None and 4 <= a <= 9)
        # the only filter of the topic: its bits are set exactly on the records it matches
        assert by_bitmap(h, "CG") == want
        assert await pull_as(h) == want
        ext = h.broker.store.message_store.consume_queue_ext(T, 0)
        assert ext is not None and ext.bit_count == 112


async def test_a_filter_registered_after_dispatch_judges_the_older_records(
    tmp_path: Any, mock_clock: Any
) -> None:
    async with harness(tmp_path, **BITMAP) as h:
        assert (await h.invoke(heartbeat("a < 2", 1))).code == ResponseCode.SUCCESS
        await trio.sleep(2)
        await send_numbered(h, 12)  # maps computed with "a < 2" only
        assert (await h.invoke(heartbeat("a IS NULL", 1, group="CG2"))).code == 0
        await trio.sleep(2)
        # the maps know nothing of CG2's filter: every older record is read and judged
        assert len(by_bitmap(h, "CG2")) == 12
        assert await pull_as(h, group="CG2") == numbered(12, lambda a: a is None)
        assert await pull_as(h, group="CG") == numbered(12, lambda a: a is not None and a < 2)
        await send_numbered(h, 8)  # m0..m7 again at offsets 12..19, maps with both filters
        assert by_bitmap(h, "CG2", 12) == [b"m3", b"m7"]
        assert await pull_as(h, 12, group="CG2") == [b"m3", b"m7"]


def pop(expression: str, group: str = "PG") -> RemotingCommand:
    header = PopMessageRequestHeader(
        consumerGroup=group,
        topic=T,
        queueId=0,
        maxMsgNums=32,
        invisibleTime=60_000,
        pollTime=0,
        bornTime=0,
        initMode=0,
        expType="SQL92",
        exp=expression,
    )
    return RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=to_ext(header))


async def test_pop_skips_on_the_registered_filters_bits(tmp_path: Any, mock_clock: Any) -> None:
    async with harness(tmp_path, **BITMAP) as h:
        assert (await h.invoke(heartbeat("a >= 5 OR a = 0", 1, group="PG"))).code == 0
        await trio.sleep(2)
        await send_numbered(h, 8)
        assert by_bitmap(h, "PG") == [b"m0", b"m5", b"m6"]
        assert bodies(await h.invoke(pop("a >= 5 OR a = 0"))) == [b"m0", b"m5", b"m6"]


async def test_a_pop_with_another_expression_than_its_groups_filter_is_judged(
    tmp_path: Any, mock_clock: Any
) -> None:
    async with harness(tmp_path, **BITMAP) as h:
        assert (await h.invoke(heartbeat("a = 1", 1, group="PG"))).code == 0
        await trio.sleep(2)
        await send_numbered(h, 8)  # the maps have PG's bits on m1 only
        assert bodies(await h.invoke(pop("a >= 5"))) == [b"m5", b"m6"]


async def test_a_departed_groups_filter_is_dropped_and_a_returning_group_works(
    tmp_path: Any, mock_clock: Any
) -> None:
    async with harness(tmp_path, filterDataCleanTimeSpan=60_000, **BITMAP) as h:
        manager = h.broker.filters.manager
        assert (await h.invoke(heartbeat("a < 2", 1))).code == ResponseCode.SUCCESS
        await send_numbered(h, 4)
        assert await pull_as(h) == [b"m0", b"m1"]
        assert len(manager) == 1
        header = UnregisterClientRequestHeader(clientID="c1", consumerGroup="CG")
        cmd = RemotingCommand(RequestCode.UNREGISTER_CLIENT, ext_fields=to_ext(header))
        assert (await h.invoke(cmd)).code == ResponseCode.SUCCESS
        await trio.sleep(30)
        data = manager.registered(T, "CG")
        assert data is not None and data.is_dead  # dead, kept for filterDataCleanTimeSpan
        await trio.sleep(32)
        assert len(manager) == 0 and not manager.wants(T)  # compiled filter released
        # the group comes back: registered anew, its maps computed again, pulls filter
        assert (await h.invoke(heartbeat("a < 2", 1))).code == ResponseCode.SUCCESS
        await trio.sleep(2)
        await send_numbered(h, 4)
        assert by_bitmap(h, "CG", 4) == [b"m0", b"m1"]
        assert await pull_as(h, 4) == [b"m0", b"m1"]
