"""The pure parts of getConsumerStatus: which members the broker asks (join order, an old client
refused, ``clientAddr`` asks one), the broker's body in Java HashMap order, a member's answer
left out when it failed, the client's offsets (push consumers only) and the command's lines."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rocketrio.actors.broker.clients.client_manager import ClientChannelInfo
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.query.consumer_status import client_offsets, plan, status_body
from rocketrio.actors.client.consumer_status_reply import offsets_of
from rocketrio.actors.client.process_queue import OffsetTable
from rocketrio.actors.kernel.remoting import RemotingTimeout
from rocketrio.cli.admin_get_consumer_status import status_lines
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.consumer_status import GetConsumerStatusBody
from rocketrio.protocol.remoting import RemotingCommand

SE = ResponseCode.SYSTEM_ERROR
MQ0, MQ1, MQU = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1), MessageQueue("U", "b", 0)


def member(cid: str, version: int = 453) -> ClientChannelInfo:
    return ClientChannelInfo(object(), cid, "JAVA", version, 0.0)


def test_no_member_is_refused() -> None:
    assert plan("G", [], None) == Refusal(SE, "No Any Consumer online in the consumer group: [G]")


def test_every_member_in_join_order_or_the_one_asked() -> None:
    a, b, c = member("a"), member("b"), member("c")
    assert plan("G", [a, b, c], None) == [a, b, c]
    assert plan("G", [a, b, c], "  ") == [a, b, c]
    assert plan("G", [a, b, c], "b") == [b]
    assert plan("G", [a, b, c], "x") == []


def test_an_old_member_met_first_is_refused_with_its_version_name() -> None:
    old = member("o", 27)
    remark = "the client does not support this feature. version=V3_0_6"
    assert plan("G", [member("a"), old], None) == Refusal(SE, remark)
    got = plan("G", [member("a"), old], "a")  # the asked one comes first: no refusal
    assert isinstance(got, list) and [m.client_id for m in got] == ["a"]
    assert plan("G", [member("o", 0)], None) == Refusal(
        SE, "the client does not support this feature. version=V3_0_0_SNAPSHOT"
    )
    got = plan("G", [member("n", 28)], None)
    assert isinstance(got, list) and len(got) == 1


def test_the_broker_body_lists_clients_in_hashmap_order() -> None:
    names = [f"client-{i}" for i in range(20)]
    body = status_body([(n, {MQ0: 1}) for n in names])
    assert list(body.consumerTable) == fastjson.java_hashmap_order(names, fastjson.java_string_hash)
    assert fastjson.encode(status_body([("c", {MQ0: 4})])) == (
        b'{"consumerTable":{"c":{{"brokerName":"b","queueId":0,"topic":"T"}:4}},'
        b'"messageQueueTable":{}}'
    )


def test_a_failed_or_empty_answer_is_left_out() -> None:
    cmd = RemotingCommand(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT)
    body = fastjson.encode(GetConsumerStatusBody({MQ1: 7}))
    assert client_offsets(cmd.make_response(ResponseCode.SUCCESS, body=body)) == {MQ1: 7}
    assert client_offsets(cmd.make_response(ResponseCode.SUCCESS)) is None
    assert client_offsets(cmd.make_response(SE, "no", body=body)) is None
    assert client_offsets(RemotingTimeout("late")) is None
    assert client_offsets(cmd.make_response(ResponseCode.SUCCESS, body=b"{oops")) is None


def consumer(consume_type: str, offsets: dict[MessageQueue, int]) -> Any:
    table = OffsetTable()
    for mq, off in offsets.items():
        table.update(mq, off, increase_only=False)
    return SimpleNamespace(consume_type=consume_type, offset_store=SimpleNamespace(table=table))


def test_a_push_consumer_answers_its_offsets_of_the_topic() -> None:
    push = consumer("CONSUME_PASSIVELY", {MQ0: 1, MQ1: 2, MQU: 3})
    assert offsets_of(push, "T") == {MQ0: 1, MQ1: 2}
    assert offsets_of(push, "") == {MQ0: 1, MQ1: 2, MQU: 3}
    assert offsets_of(consumer("CONSUME_ACTIVELY", {MQ0: 1}), "T") == {}
    assert offsets_of(None, "T") == {}
    assert (
        offsets_of(SimpleNamespace(consume_type="CONSUME_PASSIVELY", offset_store=None), "T") == {}
    )


def test_status_lines_are_mqadmins() -> None:
    body = GetConsumerStatusBody(consumerTable={"x" * 60: {MQ1: 12}})
    lines = status_lines(body, "G", "T", "")
    assert lines[0] == "get consumer status from client. group=G, topic=T, originClientId="
    assert lines[1].startswith("#clientId" + " " * 41 + "  #brokerName")
    assert lines[2] == "x" * 50 + "  " + "b".ljust(15) + "  " + "1".ljust(15) + "  " + "12".ljust(
        20
    )
    assert status_lines(None, "G", "T", "c")[2:] == []
