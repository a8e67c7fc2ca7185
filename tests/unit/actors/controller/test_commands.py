"""Controller events (Raft log encoding) and the controller's wire headers/bodies."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.controller.commands import (
    EVENT_TYPE_IDS,
    AlterSyncStateSetCommand,
    ApplyBrokerIdCommand,
    CleanBrokerDataCommand,
    Command,
    CommandDecodeError,
    ElectMasterCommand,
    UpdateBrokerAddressCommand,
    decode_command,
    decode_commands,
    encode_command,
    encode_commands,
)
from rocketrio.protocol import serde
from rocketrio.protocol.bodies import BrokerMemberGroup
from rocketrio.protocol.controller_headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    BrokerReplicasInfo,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseBody,
    EpochEntry,
    EpochEntryCache,
    GetMetaDataResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    ReplicaIdentity,
    ReplicasInfo,
    RoleChangeNotifyEntry,
    SyncStateSet,
    decode_broker_names,
    encode_broker_names,
    parse_broker_id_set,
)

EXAMPLES: list[Command] = [
    ApplyBrokerIdCommand("DefaultCluster", "broker-a", "10.0.0.1:10911", 1, "10.0.0.1:10911;17"),
    UpdateBrokerAddressCommand("DefaultCluster", "broker-a", "10.0.0.9:10911", 1),
    ElectMasterCommand("broker-a", 2, 5),
    ElectMasterCommand("broker-a", None, 6),
    AlterSyncStateSetCommand("broker-a", frozenset({3, 1, 2}), 2, 7),
    CleanBrokerDataCommand("broker-a", frozenset({2, 3})),
    CleanBrokerDataCommand("broker-a", None),
    ApplyBrokerIdCommand("集群", "broker-ü", "h:1", 9, "h:1;0"),
]


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: type(e).__name__)
def test_event_round_trip(event: Command) -> None:
    data = encode_command(event)
    assert struct.unpack_from(">H", data)[0] == EVENT_TYPE_IDS[type(event)]
    assert decode_command(data) == event
    assert decode_commands(data) == (event,)  # a single-event entry is a batch of one


def test_encoding_is_deterministic_and_sorted() -> None:
    a = AlterSyncStateSetCommand("b", frozenset({5, 1, 3}), 1, 1)
    b = AlterSyncStateSetCommand("b", frozenset({3, 5, 1}), 1, 1)
    assert encode_command(a) == encode_command(b)
    assert json.loads(encode_command(a)[2:])["new_sync_state_set"] == [1, 3, 5]


def test_batch_round_trip_keeps_order() -> None:
    data = encode_commands(EXAMPLES)
    assert decode_commands(data) == tuple(EXAMPLES)
    assert decode_commands(encode_commands([])) == ()


def _valid_batch() -> bytes:
    return encode_commands([ElectMasterCommand("b", 1, 0), CleanBrokerDataCommand("b", None)])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "too short"),
        (b"\x00", "too short"),
        (struct.pack(">H", 4) + b"{}", "unknown controller event type 4"),
        (struct.pack(">H", 99) + b"{}", "unknown controller event type 99"),
        (struct.pack(">H", 3) + b"{not json", "ElectMasterCommand"),
        (struct.pack(">H", 3) + b'{"broker_name":"b"}', "ElectMasterCommand"),
        (struct.pack(">H", 3) + b"\xff\xfe", "ElectMasterCommand"),
        (struct.pack(">HI", 0, 2), "truncated"),
        (_valid_batch()[:-3], "truncated"),
        (_valid_batch() + b"x", "trailing"),
        (struct.pack(">H", 0) + b"\x00", "truncated count"),
    ],
)
def test_malformed_entries_are_errors(data: bytes, message: str) -> None:
    with pytest.raises(CommandDecodeError, match=message):
        decode_commands(data)


def test_bad_field_type_is_an_error() -> None:
    data = (
        struct.pack(">H", 3)
        + json.dumps(
            {"broker_name": "b", "new_master_broker_id": "x", "expected_master_epoch": 1}
        ).encode()
    )
    with pytest.raises(CommandDecodeError, match="ElectMasterCommand"):
        decode_command(data)


names = st.text(min_size=1, max_size=12)
ids = st.integers(min_value=0, max_value=2**62)
id_sets = st.frozensets(st.integers(min_value=0, max_value=1000), max_size=6)
events_strategy: st.SearchStrategy[Command] = st.one_of(
    st.builds(ApplyBrokerIdCommand, names, names, names, ids, names),
    st.builds(UpdateBrokerAddressCommand, names, names, names, ids),
    st.builds(ElectMasterCommand, names, st.none() | ids, ids),
    st.builds(AlterSyncStateSetCommand, names, id_sets, ids, ids),
    st.builds(CleanBrokerDataCommand, names, st.none() | id_sets),
)


@given(st.lists(events_strategy, max_size=8))
def test_any_events_round_trip(events: list[Command]) -> None:
    assert decode_commands(encode_commands(events)) == tuple(events)
    for event in events:
        assert decode_command(encode_command(event)) == event


# --- wire headers ----------------------------------------------------------------------------


def test_apply_broker_id_header_uses_upstream_field_names() -> None:
    ext = {
        "clusterName": "c",
        "brokerName": "b",
        "appliedBrokerId": "3",
        "registerCheckCode": "1.2.3.4:10911;1700000000000",
    }
    header = serde.from_ext(ApplyBrokerIdRequestHeader, ext)
    assert header.appliedBrokerId == 3
    assert serde.to_ext(header) == ext


def test_register_to_controller_headers() -> None:
    ext = {"clusterName": "c", "brokerName": "b", "brokerId": "2", "brokerAddress": "h:1"}
    req = serde.from_ext(RegisterBrokerToControllerRequestHeader, ext)
    assert (req.brokerId, req.invokeTime) == (2, None)
    resp = RegisterBrokerToControllerResponseHeader("c", "b")
    assert serde.to_ext(resp) == {"clusterName": "c", "brokerName": "b"}  # no master: omitted
    with pytest.raises(serde.HeaderError, match="brokerAddress"):
        serde.from_ext(RegisterBrokerToControllerRequestHeader, {**ext, "brokerAddress": None})


@pytest.mark.parametrize(
    ("header", "named", "designate"),
    [
        (ElectMasterRequestHeader.of_controller_trigger("b"), None, False),
        (ElectMasterRequestHeader.of_broker_trigger("c", "b", 2), 2, False),
        (ElectMasterRequestHeader.of_admin_trigger("c", "b", 3), 3, True),
    ],
)
def test_elect_master_triggers(
    header: ElectMasterRequestHeader, named: int | None, designate: bool
) -> None:
    back = serde.from_ext(ElectMasterRequestHeader, serde.to_ext(header))
    assert back == header
    assert (back.named_broker_id, back.designateElect) == (named, designate)


def test_elect_master_defaults_match_upstream() -> None:
    header = serde.from_ext(ElectMasterRequestHeader, {"brokerName": "b"})
    assert (header.clusterName, header.brokerId, header.designateElect) == ("", -1, False)


def test_alter_sync_state_set_request_and_body() -> None:
    header = serde.from_ext(
        AlterSyncStateSetRequestHeader,
        {"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "4"},
    )
    assert (header.masterBrokerId, header.masterEpoch) == (1, 4)
    body = serde.from_json(SyncStateSet, b'{"syncStateSet":[3,1,2,1],"syncStateSetEpoch":7}')
    assert body == SyncStateSet([1, 2, 3], 7)
    assert serde.to_json(body) == b'{"syncStateSet":[1,2,3],"syncStateSetEpoch":7}'


def test_elect_master_response_body_json() -> None:
    body = ElectMasterResponseBody(BrokerMemberGroup("c", "b", {2: "h:2", 1: "h:1"}), [2])
    plain = json.loads(serde.to_json(body))
    assert plain == {
        "brokerMemberGroup": {
            "cluster": "c",
            "brokerName": "b",
            "brokerAddrs": {"2": "h:2", "1": "h:1"},
        },
        "syncStateSet": [2],
    }
    assert serde.from_json(ElectMasterResponseBody, serde.to_json(body)) == body


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, None),
        ("", None),
        ("  ", None),
        ("1", frozenset({1})),
        ("1;2;3", frozenset({1, 2, 3})),
        (" 3 ; 1 ;", frozenset({1, 3})),
    ],
)
def test_parse_broker_id_set(text: str | None, expected: frozenset[int] | None) -> None:
    assert parse_broker_id_set(text) == expected


@pytest.mark.parametrize("text", ["1,2", "a", "1;x", "-1"])
def test_parse_broker_id_set_rejects(text: str) -> None:
    with pytest.raises(serde.HeaderError, match="brokerControllerIdsToClean"):
        parse_broker_id_set(text)


def test_clean_broker_data_header() -> None:
    header = serde.from_ext(
        CleanControllerBrokerDataRequestHeader,
        {"brokerName": "b", "brokerControllerIdsToClean": "1;2", "isCleanLivingBroker": "true"},
    )
    assert header.broker_ids() == frozenset({1, 2})
    assert header.isCleanLivingBroker is True
    with pytest.raises(serde.HeaderError, match="brokerName"):
        serde.from_ext(CleanControllerBrokerDataRequestHeader, {})


def test_broker_names_body() -> None:
    assert decode_broker_names(encode_broker_names(["a", "b"])) == ["a", "b"]
    assert decode_broker_names(b"") == []
    for bad in (b"{", b'{"a":1}', b"[1]"):
        with pytest.raises(serde.HeaderError):
            decode_broker_names(bad)


def test_sync_state_data_body_json() -> None:
    info = BrokerReplicasInfo(
        {"b": ReplicasInfo(1, "h:1", 2, 3, [ReplicaIdentity("b", 1, "h:1", True)], [])}
    )
    plain = json.loads(serde.to_json(info))
    assert plain["replicasInfoTable"]["b"]["inSyncReplicas"] == [
        {"brokerName": "b", "brokerId": 1, "brokerAddress": "h:1", "alive": True}
    ]
    assert serde.from_json(BrokerReplicasInfo, serde.to_json(info)) == info


def test_role_change_notify_entry_to_wire() -> None:
    entry = RoleChangeNotifyEntry(2, "h:2", 5, 6, frozenset({2, 1}))
    assert serde.to_ext(entry.header()) == {
        "masterAddress": "h:2",
        "masterEpoch": "5",
        "syncStateSetEpoch": "6",
        "masterBrokerId": "2",
    }
    assert serde.to_json(entry.body()) == b'{"syncStateSet":[1,2],"syncStateSetEpoch":6}'


def test_heartbeat_header_carries_election_fields() -> None:
    header = serde.from_ext(
        BrokerHeartbeatRequestHeader,
        {
            "clusterName": "c",
            "brokerAddr": "h:1",
            "brokerName": "b",
            "brokerId": "2",
            "epoch": "3",
            "maxOffset": "1024",
            "confirmOffset": "512",
            "electionPriority": "1",
        },
    )
    assert (header.epoch, header.maxOffset, header.confirmOffset, header.electionPriority) == (
        3,
        1024,
        512,
        1,
    )


def test_metadata_and_epoch_cache_bodies() -> None:
    meta = GetMetaDataResponseHeader("g", "n0", "h:9877", True, "n0-h:9877")
    assert serde.to_ext(meta)["isLeader"] == "true"
    cache = EpochEntryCache("c", "b", 1, [EpochEntry(1, 0, 100), EpochEntry(2, 100)], 150)
    plain = json.loads(serde.to_json(cache))
    assert plain["epochList"][1] == {"epoch": 2, "startOffset": 100, "endOffset": 2**63 - 1}
    assert serde.from_json(EpochEntryCache, serde.to_json(cache)) == cache
