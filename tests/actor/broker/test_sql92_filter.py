"""SQL92 filtering on a real broker (SimNetwork + MockClock): pulls with the SUBSCRIPTION flag and
from heartbeat subscriptions, long-polled pulls, POP, retry topics, CHECK_CLIENT_CONFIG and the
live enablePropertyFilter key, with upstream's codes and remarks (docs/sql92-filter.md)."""

from __future__ import annotations

import json
from typing import Any

import structlog.testing
import trio
import trio.testing

from rocketrio.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.filter import CheckClientRequestBody
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.pop_headers import PopMessageRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext, to_json
from tests.harness.broker import BrokerHarness, harness

T = "SqlT"
ON = {"enablePropertyFilter": True}


def bodies(resp: RemotingCommand) -> list[bytes]:
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return [m.body for m in iter_stored(resp.body)]


async def send_numbered(h: BrokerHarness, n: int, topic: str = T, **extra: str) -> None:
    for i in range(n):
        props = {"a": str(i), **extra} if i % 4 != 3 else dict(extra)  # every 4th: no "a"
        r = await h.send(topic, f"m{i}".encode(), props=props, queue_id=0)
        assert r.code == ResponseCode.SUCCESS


async def sql_pull(h: BrokerHarness, sql: str, offset: int = 0, **kw: Any) -> RemotingCommand:
    header = h.pull_header(T, 0, offset, sub=sql, **kw)
    header.expressionType = "SQL92"
    return await h.invoke(RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=to_ext(header)))


def heartbeat(sql: str, version: int, group: str = "CG") -> RemotingCommand:
    sub = SubscriptionData(topic=T, subString=sql, subVersion=version, expressionType="SQL92")
    data = HeartbeatData(
        clientID="c1",
        consumerDataSet=[ConsumerData(groupName=group, subscriptionDataSet=[sub])],
    )
    return RemotingCommand(RequestCode.HEART_BEAT, body=to_json(data))


def check_config(sql: str, etype: str = "SQL92") -> RemotingCommand:
    sub = SubscriptionData(topic=T, subString=sql, expressionType=etype)
    body = CheckClientRequestBody(clientId="c1", group="CG", subscriptionData=sub)
    return RemotingCommand(RequestCode.CHECK_CLIENT_CONFIG, body=to_json(body))


async def test_pull_with_sql92_subscription(tmp_path: Any, mock_clock: Any) -> None:
    async with harness(tmp_path, **ON) as h:
        await send_numbered(h, 12)
        resp = await sql_pull(h, "a BETWEEN 4 AND 9")
        assert bodies(resp) == [b"m4", b"m5", b"m6", b"m8", b"m9"]
        assert resp.ext_fields["nextBeginOffset"] == "12"
        # a missing property: NULL, never a match, except IS NULL
        assert bodies(await sql_pull(h, "a IS NULL")) == [b"m3", b"m7", b"m11"]
        assert len(bodies(await sql_pull(h, "NOT (a > 100)"))) == 9
        assert bodies(await sql_pull(h, "a IN ('1', '10') OR a = 2")) == [b"m1", b"m2", b"m10"]
        # a batch with no match: retry at once from the end of what was judged
        resp = await sql_pull(h, "a > 100")
        assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert resp.ext_fields["nextBeginOffset"] == "12"
        # max messages: the next pull starts right after the last one handed out
        resp = await sql_pull(h, "a >= 0", max_msgs=2)
        assert bodies(resp) == [b"m0", b"m1"] and resp.ext_fields["nextBeginOffset"] == "2"


async def test_bad_expressions_refused_by_name(tmp_path: Any, mock_clock: Any) -> None:
    async with harness(tmp_path, **ON) as h:
        await send_numbered(h, 2)
        for bad in ("a >", "a = NULL", "a BETWEEN 5 AND 1", "a > 'x'", "a # 1", ""):
            resp = await sql_pull(h, bad)
            assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, bad
            assert (resp.remark or "").startswith("parse the consumer's subscription failed")
        # the broker still serves
        assert bodies(await sql_pull(h, "a = 1")) == [b"m1"]


async def test_heartbeat_subscription_and_filter_data(tmp_path: Any, mock_clock: Any) -> None:
    async with harness(tmp_path, **ON) as h:
        await send_numbered(h, 8)
        assert (await h.invoke(heartbeat("a < 2", version=5))).code == ResponseCode.SUCCESS
        resp = await h.pull(T, 0, 0, sub=None, flags=0)
        assert bodies(resp) == [b"m0", b"m1"]
        # a heartbeat expression that does not compile has no filter data (upstream's answer)
        assert (await h.invoke(heartbeat("a <", version=6))).code == ResponseCode.SUCCESS
        resp = await h.pull(T, 0, 0, sub=None, flags=0)
        assert resp.code == ResponseCode.FILTER_DATA_NOT_EXIST
        assert resp.remark == (
            "The broker's consumer filter data is not exist!Your expression may be wrong!"
        )


async def test_property_filter_off_and_live(tmp_path: Any, mock_clock: Any) -> None:
    async with harness(tmp_path) as h:
        await send_numbered(h, 3)
        resp = await sql_pull(h, "a = 1")
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == "The broker does not support consumer to filter message by SQL92"
        resp = await h.invoke(check_config("a = 1"))
        assert resp.code == ResponseCode.SYSTEM_ERROR
        body = b"enablePropertyFilter=true\n"
        resp = await h.invoke(RemotingCommand(RequestCode.UPDATE_BROKER_CONFIG, body=body))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert bodies(await sql_pull(h, "a = 1")) == [b"m1"]
        assert (await h.invoke(check_config("a = 1"))).code == ResponseCode.SUCCESS


async def test_check_client_config(tmp_path: Any, mock_clock: Any) -> None:
    async with harness(tmp_path, **ON) as h:
        assert (await h.invoke(check_config("a || b", "TAG"))).code == ResponseCode.SUCCESS
        assert (await h.invoke(check_config("a IS NOT NULL"))).code == ResponseCode.SUCCESS
        with structlog.testing.capture_logs() as logs:
            resp = await h.invoke(check_config("a BETWEEN 3 AND 1"))
        assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        [refused] = [e for e in logs if e["event"] == "sql92_subscription_refused"]
        assert refused["group"] == "CG" and refused["expression"] == "a BETWEEN 3 AND 1"
        assert refused["log_level"] == "warning" and refused["error"] == resp.remark
        assert resp.remark == (
            "java.lang.RuntimeException: Illegal values of between, left value(3) must less "
            "than or equal to right value(1)"
        )
        resp = await h.invoke(check_config("a >"))
        assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "ParseException" in (resp.remark or "")


async def test_held_pull_wakes_only_for_a_match(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **ON) as h:
        await send_numbered(h, 1)
        got: list[RemotingCommand] = []

        async def pull() -> None:
            got.append(await sql_pull(h, "color = 'red'", offset=1, suspend_ms=20_000))

        async with trio.open_nursery() as n:
            n.start_soon(pull)
            await trio.sleep(1)
            r = await h.send(T, b"blue", props={"color": "blue"}, queue_id=0)
            assert r.code == ResponseCode.SUCCESS
            await trio.sleep(1)
            assert not got  # a message the selector rejects does not answer the held pull
            r = await h.send(T, b"red", props={"color": "red"}, queue_id=0)
            assert r.code == ResponseCode.SUCCESS
        assert bodies(got[0]) == [b"red"]
        assert got[0].ext_fields["nextBeginOffset"] == "3"


async def test_pop_with_sql92(tmp_path: Any, mock_clock: Any) -> None:
    async with harness(tmp_path) as h:  # upstream's POP does not read enablePropertyFilter
        await send_numbered(h, 8)
        header = PopMessageRequestHeader(
            consumerGroup="PG1",
            topic=T,
            queueId=0,
            maxMsgNums=32,
            invisibleTime=60_000,
            pollTime=0,
            bornTime=0,
            initMode=0,
            expType="SQL92",
            exp="a >= 5 OR a = 0",
        )
        resp = await h.invoke(RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=to_ext(header)))
        assert bodies(resp) == [b"m0", b"m5", b"m6"]
        header.exp = "a BETWEEN"
        resp = await h.invoke(RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=to_ext(header)))
        assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_retry_topic_is_not_filtered(tmp_path: Any, mock_clock: Any) -> None:
    """The client subscribes %RETRY%<group> with TAG "*": retry messages are not filtered."""
    async with harness(tmp_path, **ON) as h:
        retry = "%RETRY%CG"
        for i, color in enumerate(("red", "blue")):
            r = await h.send(retry, f"r{i}".encode(), props={"color": color}, queue_id=0)
            assert r.code == ResponseCode.SUCCESS, r.remark
        resp = await h.pull(retry, 0, 0, sub="*")
        assert bodies(resp) == [b"r0", b"r1"]
        assert json.loads(json.dumps(resp.ext_fields))["nextBeginOffset"] == "2"


async def test_held_pop_wakes_only_for_a_match(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await send_numbered(h, 1)  # the topic exists; m0 (a = 0) does not match
        header = PopMessageRequestHeader(
            consumerGroup="PG2",
            topic=T,
            queueId=0,
            maxMsgNums=8,
            invisibleTime=60_000,
            pollTime=20_000,
            bornTime=0,
            initMode=0,
            expType="SQL92",
            exp="color = 'red'",
        )
        got: list[RemotingCommand] = []

        async def pop() -> None:
            cmd = RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=to_ext(header))
            got.append(await h.invoke(cmd))

        async with trio.open_nursery() as n:
            n.start_soon(pop)
            await trio.sleep(1)
            r = await h.send(T, b"blue", props={"color": "blue"}, queue_id=0)
            assert r.code == ResponseCode.SUCCESS
            await trio.sleep(1)
            assert not got  # a rejected arrival does not answer the held POP
            r = await h.send(T, b"red", props={"color": "red"}, queue_id=0)
            assert r.code == ResponseCode.SUCCESS
        assert bodies(got[0]) == [b"red"]
