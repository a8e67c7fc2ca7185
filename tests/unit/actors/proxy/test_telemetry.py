"""Telemetry bookkeeping and orphaned transaction recovery: which producer stream gets a
broker's transaction check, and what it is sent."""

from __future__ import annotations

import socket

from rocketrio.actors.proxy import mapping as mp
from rocketrio.actors.proxy.receipt import TransactionId
from rocketrio.actors.proxy.telemetry import TelemetryRegistry
from rocketrio.actors.proxy.transaction_check import TransactionCheckRelay
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.headers import CheckTransactionStateRequestHeader
from rocketrio.protocol.message import encode_properties
from rocketrio.protocol.message_build import build_stored_message
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext


class Stream:
    def __init__(self, open_: bool = True) -> None:
        self.got: list[object] = []
        self.open = open_

    def __call__(self, command: object) -> bool:
        if self.open:
            self.got.append(command)
        return self.open


def producer(*topics: str) -> pb.Settings:
    return pb.Settings(
        client_type=pb.PRODUCER,
        publishing=pb.Publishing(topics=[pb.Resource(name=t) for t in topics]),
    )


def test_producer_for_a_topic_round_robin_and_consumers_never() -> None:
    reg = TelemetryRegistry()
    a, b, c = Stream(), Stream(), Stream()
    reg.update("a", a, producer("T", "U"))
    reg.update("b", b, producer("T"))
    reg.update("c", c, pb.Settings(client_type=pb.SIMPLE_CONSUMER))
    picks = [reg.producer_for("T").client_id for _ in range(4)]  # type: ignore[union-attr]
    assert sorted(picks) == ["a", "a", "b", "b"]
    assert reg.producer_for("U").client_id == "a"  # type: ignore[union-attr]
    assert reg.producer_for("V") is None


def test_a_closed_stream_is_forgotten_but_not_its_clients_newer_one() -> None:
    reg = TelemetryRegistry()
    old, new = Stream(), Stream()
    reg.update("a", old, producer("T"))
    reg.update("a", new, producer("T"))  # the client reconnected
    reg.closed(old)
    assert reg.producer_for("T").push is new  # type: ignore[union-attr]
    reg.closed(new)
    assert reg.producer_for("T") is None
    reg.update("b", Stream(), producer("T"))
    reg.forget("b")  # NotifyClientTermination
    assert reg.streams == {}


def check_request(group: str, topic: str = "T") -> RemotingCommand:
    props = encode_properties(
        {"UNIQ_KEY": "MSG1", "TRAN_MSG": "true", "PGROUP": group, "color": "red"}
    )
    host = (socket.inet_aton("127.0.0.1"), 10911)
    body = build_stored_message(
        topic=topic, queue_id=0, body=b"half", flag=0, properties=props, sys_flag=4,
        born_timestamp=1000, born_host=host, store_timestamp=2000, store_host=host,
    )  # fmt: skip
    header = CheckTransactionStateRequestHeader(
        tranStateTableOffset=5, commitLogOffset=4096, topic=topic, msgId="MSG1",
        transactionId="BTX", offsetMsgId="OFF", bname=None,
    )  # fmt: skip
    return RemotingCommand(
        RequestCode.CHECK_TRANSACTION_STATE, ext_fields=to_ext(header), body=body
    )


def test_check_for_a_half_sent_through_the_proxy_goes_to_a_producer_of_its_topic() -> None:
    reg = TelemetryRegistry()
    p, other = Stream(), Stream()
    reg.update("p", p, producer("T"))
    reg.update("o", other, producer("U"))
    relay = TransactionCheckRelay(reg, {"10.0.0.1:10911": "broker-a"}.__getitem__)
    assert relay.on_check("10.0.0.1:10911", check_request(mp.PROXY_PRODUCER_GROUP))
    assert other.got == []
    [cmd] = p.got
    rec = cmd.recover_orphaned_transaction_command  # type: ignore[attr-defined]
    assert TransactionId.decode(rec.transaction_id) == TransactionId("broker-a", 4096, 5, "BTX")
    assert rec.message.topic.name == "T" and rec.message.body == b"half"
    assert rec.message.system_properties.message_id == "MSG1"
    assert rec.message.system_properties.message_type == pb.TRANSACTION
    assert not rec.message.system_properties.HasField("receipt_handle")
    assert dict(rec.message.user_properties) == {"color": "red"}


def test_checks_of_other_groups_are_not_the_proxys() -> None:
    reg = TelemetryRegistry()
    p = Stream()
    reg.update("p", p, producer("T"))
    relay = TransactionCheckRelay(reg, lambda addr: "broker-a")
    assert not relay.on_check("x", check_request("someone-else"))
    assert not relay.on_check("x", RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE))
    assert p.got == []


def test_no_producer_connected_drops_the_check_for_the_broker_to_ask_again() -> None:
    reg = TelemetryRegistry()
    gone = Stream(open_=False)
    reg.update("p", gone, producer("T"))
    relay = TransactionCheckRelay(reg, lambda addr: "broker-a")
    assert relay.on_check("x", check_request(mp.PROXY_PRODUCER_GROUP))  # taken, not pushed
    assert gone.got == []
