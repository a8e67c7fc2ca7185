"""POP's pure parts: receipts (extraInfo) and offset infos in upstream's text format, CK / ACK
JSON and unique ids, batch-ack bit sets, the revive decision (CK vs ACK matching, due time),
and the client's receipt building."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.auth.model import Action, AuthDataError, Resource
from rocketrio.actors.auth.rights import Right, rights_of
from rocketrio.actors.broker.pop.revive import MAX_AHEAD, ReviveCore
from rocketrio.actors.client.simple_consumer import receipts_of
from rocketrio.protocol.codes import RequestCode as RC
from rocketrio.protocol.message import MessageExt
from rocketrio.protocol.pop_checkpoint import (
    AckMsg,
    BatchAck,
    BatchAckMessageRequestBody,
    PopCheckPoint,
    bitset_to_bytes,
    bytes_to_bits,
)
from rocketrio.protocol.pop_extra_info import (
    ExtraInfo,
    ExtraInfoError,
    msg_offset_entry,
    normal_topic_of,
    parse_msg_offset_info,
    parse_start_offset_info,
    pop_retry_topic_v1,
    pop_retry_topic_v2,
    real_topic,
    retry_flag,
    revive_topic,
    start_offset_entry,
)
from rocketrio.protocol.pop_headers import PopMessageResponseHeader
from rocketrio.protocol.remoting import RemotingCommand

PT = 1_700_000_000_000

# ------------------------------------------------------------------------- names, receipts


def test_topic_names_as_upstream_key_builder() -> None:
    assert pop_retry_topic_v1("T", "G") == "%RETRY%G_T"
    assert pop_retry_topic_v2("T", "G") == "%RETRY%G+T"
    assert revive_topic("DefaultCluster") == "rmq_sys_REVIVE_LOG_DefaultCluster"
    assert [retry_flag(t) for t in ("T", "%RETRY%G_T", "%RETRY%G+T", "%RETRY%G")] == [
        "0",
        "1",
        "2",
        "1",
    ]
    assert real_topic("T", "G", "0") == "T"
    assert real_topic("T", "G", "1") == "%RETRY%G_T"
    assert real_topic("T", "G", "2") == "%RETRY%G+T"
    with pytest.raises(ExtraInfoError):
        real_topic("T", "G", "3")
    assert normal_topic_of("%RETRY%G_T_x", "G") == "T_x"
    assert normal_topic_of("%RETRY%G+T", "G") == "T"


@pytest.mark.parametrize(
    ("args", "golden"),
    [
        # ExtraInfoUtil.buildExtraInfo(ckQueueOffset, popTime, invisibleTime, reviveQid, topic,
        # brokerName, queueId[, msgQueueOffset]) joined by MessageConst.KEY_SEPARATOR (" ")
        ((0, PT, 30_000, 3, "T", "broker-a", 1), "0 1700000000000 30000 3 0 broker-a 1"),
        ((5, PT, 60_000, 0, "T", "b", 2, 7), "5 1700000000000 60000 0 0 b 2 7"),
        ((9, PT, 1, 7, "%RETRY%G_T", "b", 0, 9), "9 1700000000000 1 7 1 b 0 9"),
        ((9, PT, 1, 7, "%RETRY%G+T", "b", 0, 9), "9 1700000000000 1 7 2 b 0 9"),
    ],
)
def test_extra_info_golden_strings(args: tuple, golden: str) -> None:  # type: ignore[type-arg]
    info = ExtraInfo.of(*args)
    assert info.build() == golden
    assert ExtraInfo.parse(golden) == info
    assert info.revive_time == args[1] + args[2]


@pytest.mark.parametrize(
    "bad", ["", "1 2 3", "a 1 2 3 0 b 1", "1 2 3 4 0 b 1 2 3", "1 2 3 4 0 b x"]
)
def test_bad_extra_info_is_refused(bad: str) -> None:
    with pytest.raises(ExtraInfoError):
        ExtraInfo.parse(bad)


def test_offset_infos_build_and_parse_like_upstream() -> None:
    start = ";".join([start_offset_entry("T", 1, 5), start_offset_entry("%RETRY%G_T", 0, 2)])
    msgs = ";".join([msg_offset_entry("T", 1, [5, 6, 8]), msg_offset_entry("%RETRY%G_T", 0, [2])])
    assert start == "0 1 5;1 0 2"
    assert msgs == "0 1 5,6,8;1 0 2"
    assert parse_start_offset_info(start) == {"0@1": 5, "1@0": 2}
    assert parse_msg_offset_info(msgs) == {"0@1": [5, 6, 8], "1@0": [2]}
    assert parse_start_offset_info("") == {}
    with pytest.raises(ExtraInfoError):
        parse_start_offset_info("0 1 5;0 1 6")  # duplicate key
    with pytest.raises(ExtraInfoError):
        parse_msg_offset_info("0 1")


# ------------------------------------------------------------------------- CK / ACK records


def ck(**kw: object) -> PopCheckPoint:
    values: dict[str, object] = {
        "start_offset": 10,
        "pop_time": PT,
        "invisible_time": 30_000,
        "num": 3,
        "queue_id": 1,
        "topic": "T",
        "cid": "G",
        "broker_name": "broker-a",
        "queue_offset_diff": (0, 2, 5),
    }
    values.update(kw)
    return PopCheckPoint(**values)  # type: ignore[arg-type]


def ack(offsets: tuple[int, ...], **kw: object) -> AckMsg:
    values: dict[str, object] = {
        "ack_offsets": offsets,
        "start_offset": 10,
        "consumer_group": "G",
        "topic": "T",
        "queue_id": 1,
        "pop_time": PT,
        "broker_name": "broker-a",
        "batch": len(offsets) > 1,
    }
    values.update(kw)
    return AckMsg(**values)  # type: ignore[arg-type]


def test_checkpoint_json_uses_upstream_short_names_sorted() -> None:
    text = ck().to_json()
    assert text == (
        b'{"bm":0,"bn":"broker-a","c":"G","d":[0,2,5],"it":30000,"n":3,"pt":1700000000000,'
        b'"q":1,"ro":0,"so":10,"t":"T"}'
    )
    assert PopCheckPoint.from_json(text) == ck()
    long_names = json.dumps(
        {
            "startOffset": 10,
            "popTime": PT,
            "invisibleTime": 30_000,
            "num": 3,
            "queueId": 1,
            "topic": "T",
            "cid": "G",
            "brokerName": "broker-a",
            "queueOffsetDiff": [0, 2, 5],
        }
    ).encode()
    assert PopCheckPoint.from_json(long_names) == ck()


def test_checkpoint_offsets_and_unique_id() -> None:
    c = ck()
    assert [c.index_of_ack(o) for o in (9, 10, 11, 12, 15, 16)] == [-1, 0, -1, 1, 2, -1]
    assert [c.ack_offset_by_index(i) for i in range(3)] == [10, 12, 15]
    dense = ck(queue_offset_diff=())
    assert [dense.index_of_ack(o) for o in (10, 12, 13)] == [0, 2, -1]
    assert c.revive_time == PT + 30_000
    # PopMessageProcessor.genCkUniqueId / genAckUniqueId / genBatchAckUniqueId
    assert c.unique_id() == "T@1@10@G@1700000000000@broker-a@ck"
    assert ack((12,)).unique_id() == "T@1@12@G@1700000000000@broker-a@ack"
    assert ack((10, 15)).unique_id() == "T@1@[10, 15]@G@1700000000000@bAck"


def test_ack_json_round_trip() -> None:
    single = ack((12,))
    assert json.loads(single.to_json()) == {
        "ao": 12,
        "so": 10,
        "c": "G",
        "t": "T",
        "q": 1,
        "pt": PT,
        "bn": "broker-a",
    }
    assert AckMsg.from_json(single.to_json(), batch=False) == single
    batch = ack((10, 15))
    assert json.loads(batch.to_json())["aol"] == [10, 15]
    assert AckMsg.from_json(batch.to_json(), batch=True) == batch


def test_batch_ack_bitset_like_java_bitset_to_byte_array() -> None:
    assert bitset_to_bytes([]) == b""
    assert bitset_to_bytes([0]) == b"\x01"
    assert bitset_to_bytes([0, 2, 9]) == bytes([0b101, 0b10])
    assert bytes_to_bits(bytes([0b101, 0b10])) == [0, 2, 9]
    b = BatchAck("G", "T", "0", 10, 1, 3, PT, 30_000, (0, 2, 9))
    d = b.to_dict()
    assert d["b"] == base64.b64encode(bytes([0b101, 0b10])).decode()
    assert BatchAck.from_dict(d) == b
    assert b.ack_offsets() == [10, 12, 19]
    body = BatchAckMessageRequestBody("broker-a", (b,))
    assert BatchAckMessageRequestBody.from_json(body.to_json()) == body


# ------------------------------------------------------------------------- revive decision


def test_unacked_ck_is_due_exactly_at_its_revive_time() -> None:
    core = ReviveCore(0, 0)
    core.on_ck(ck(), 0)
    core.advance_read(1)
    assert core.due(PT + 29_999) == []
    [r] = core.due(PT + 30_000)
    assert r.offsets == (10, 12, 15)
    assert core.next_due_ms() == PT + 30_000


def test_acks_set_bits_and_a_fully_acked_ck_is_forgotten() -> None:
    core = ReviveCore(0, 0)
    core.on_ck(ck(), 4)
    m = core.on_ack(ack((12,)))
    assert (m.matched, m.done) == (1, False)
    assert core.on_ack(ack((12,))).matched == 0  # twice counts once
    [r] = core.due(PT + 30_000)
    assert r.offsets == (10, 15)
    assert core.inflight() == {("G", "T", 1): 2}
    m = core.on_ack(ack((10, 15)))  # a batch ack
    assert m.done and core.due(PT + 99_999) == [] and core.pending_count == 0
    core.advance_read(9)
    assert core.revive_offset() == 9


def test_ack_only_matches_its_own_ck() -> None:
    core = ReviveCore(0, 0)
    core.on_ck(ck(), 0)
    for other in (
        ack((10,), broker_name="broker-b"),  # brokerName is part of the key
        ack((10,), pop_time=PT + 1),
        ack((10,), consumer_group="G2"),
        ack((10,), start_offset=11),
        ack((11,)),  # not one of the CK's offsets
    ):
        core.on_ack(other)
    [r] = core.due(PT + 30_000)
    assert r.offsets == (10, 12, 15)
    assert core.unmatched_acks == 4


def test_revive_offset_is_the_oldest_pending_ck() -> None:
    core = ReviveCore(0, 0)
    core.on_ck(ck(pop_time=PT), 3)
    core.on_ck(ck(pop_time=PT + 5_000), 7)
    core.advance_read(10)
    assert core.revive_offset() == 3
    [first, second] = core.due(PT + 40_000)
    assert (first.ck_offset, second.ck_offset) == (3, 7)
    core.revived(first.key)
    assert core.revive_offset() == 7
    core.revived(second.key)
    assert core.revive_offset() == 10 and core.next_due_ms() is None


def test_a_ck_read_twice_keeps_its_acks() -> None:
    core = ReviveCore(0, 0)
    core.on_ck(ck(), 0)
    core.on_ack(ack((10,)))
    core.on_ck(ck(), 0)  # re-scan
    [r] = core.due(PT + 30_000)
    assert r.offsets == (12, 15)


def state(core: ReviveCore) -> tuple[object, ...]:
    """What a core decides from: its pending CKs (due at any time), offsets and counts."""
    return (core.due(PT + 10**9), core.read_offset, core.revive_offset(), core.unmatched_acks)


def test_written_records_are_fed_as_a_read_would_feed_them() -> None:
    """Records this broker stored, given in order from the read position: `catch_up` leaves the
    core as reading them back would (same pending CKs and bits, same read offset)."""
    records: list[PopCheckPoint | AckMsg] = [
        ck(),
        ck(pop_time=PT + 1),
        ack((12,)),
        ack((10, 15), pop_time=PT + 1),
        ack((99,)),  # matches nothing
    ]
    read, fed = ReviveCore(0, 3), ReviveCore(0, 3)
    for offset, r in enumerate(records, start=3):
        if isinstance(r, PopCheckPoint):
            read.on_ck(r, offset)
        else:
            read.on_ack(r)
        read.advance_read(offset + 1)
        fed.written(offset, r)
    assert fed.read_offset == 3  # nothing fed before the round
    fed.catch_up()
    assert state(fed) == state(read) and fed.fed_written == 5
    assert [(r.ck_offset, r.offsets) for r in fed.due(PT + 10**9)] == [(3, (10, 15)), (4, (12,))]


def test_catch_up_stops_at_an_offset_not_written_here_and_drops_what_was_read() -> None:
    core = ReviveCore(0, 0)
    core.written(0, ck())
    core.written(2, ack((10,)))  # offset 1 was written by another path: a gap
    core.written(3, ack((12,)))
    core.catch_up()
    assert core.read_offset == 1 and core.fed_written == 1
    # the store read covers the gap and what follows (offsets 1..3)
    core.on_ck(ck(pop_time=PT + 7), 1)
    core.on_ack(ack((10,)))
    core.on_ack(ack((12,)))
    core.advance_read(4)
    core.written(4, ack((15,)))
    core.catch_up()  # 2 and 3 were read: dropped, not fed twice; 4 fed
    assert core.read_offset == 5 and core.fed_written == 2
    assert [r.ck.pop_time for r in core.due(PT + 10**9)] == [PT + 7]
    core.written(2, ack((10,), pop_time=PT + 7))  # behind the read position: ignored
    core.catch_up()
    assert core.read_offset == 5 and core.fed_written == 2
    assert [r.offsets for r in core.due(PT + 10**9)] == [(10, 12, 15)]


def test_written_records_past_the_bound_are_left_to_the_store() -> None:
    core = ReviveCore(0, 0)
    for offset in range(MAX_AHEAD + 5):
        core.written(offset, ack((10,), pop_time=offset))
    core.catch_up()
    assert core.read_offset == MAX_AHEAD and core.fed_written == MAX_AHEAD


# ------------------------------------------------------------------------- client receipts


def test_client_builds_receipts_like_upstream_process_pop_response() -> None:
    header = PopMessageResponseHeader(
        popTime=PT,
        invisibleTime=30_000,
        reviveQid=3,
        restNum=0,
        startOffsetInfo="0 1 10",
        msgOffsetInfo="0 1 10,12",
    )
    msgs = [MessageExt("T", b"a", queue_id=1, queue_offset=q) for q in (10, 12)]
    revived = MessageExt("T", b"r", properties={"POP_CK": "4 1 2 3 1 broker-a 0 4"})
    assert receipts_of(header, [*msgs, revived], "broker-a") == [
        "10 1700000000000 30000 3 0 broker-a 1 10",
        "10 1700000000000 30000 3 0 broker-a 1 12",
        "4 1 2 3 1 broker-a 0 4",
    ]


# ------------------------------------------------------------------------- ACL rights


def test_pop_calls_need_sub_on_group_and_topic() -> None:
    sub = (Action.SUB,)
    for code in (RC.POP_MESSAGE, RC.ACK_MESSAGE, RC.CHANGE_MESSAGE_INVISIBLETIME):
        cmd = RemotingCommand(code, ext_fields={"topic": "T", "consumerGroup": "g"})
        assert rights_of(cmd, "C1") == [
            Right(Resource.group("g"), sub),
            Right(Resource.topic("T"), sub),
        ]
    acks = (
        BatchAck("g", "T", "0", 0, 0, 0, PT, 1, (0,)),
        BatchAck("g", "T2", "0", 0, 0, 0, PT, 1, (0,)),
    )
    batch = RemotingCommand(
        RC.BATCH_ACK_MESSAGE, body=BatchAckMessageRequestBody("b", acks).to_json()
    )
    assert rights_of(batch, "C1") == [
        Right(Resource.group("g"), sub),
        Right(Resource.topic("T"), sub),
        Right(Resource.topic("T2"), sub),
    ]
    with pytest.raises(AuthDataError):
        rights_of(RemotingCommand(RC.BATCH_ACK_MESSAGE, body=b"{bad"), "C1")


# ------------------------------------------------------------------------- property


@given(
    cks=st.lists(
        st.tuples(
            st.integers(0, 3),  # queue
            st.lists(st.integers(0, 40), min_size=1, max_size=8, unique=True),  # offsets
            st.integers(1, 60_000),  # invisible time
        ),
        min_size=1,
        max_size=6,
    ),
    acked_fraction=st.floats(0, 1),
    batch=st.booleans(),
    now_delta=st.integers(0, 70_000),
    data=st.data(),
)
def test_revive_returns_exactly_the_unacked_offsets_of_due_cks(
    cks: list[tuple[int, list[int], int]],
    acked_fraction: float,
    batch: bool,
    now_delta: int,
    data: st.DataObject,
) -> None:
    core = ReviveCore(0, 0)
    expected: dict[int, tuple[int, ...]] = {}  # ck record offset -> unacked offsets
    for i, (queue, offsets, invisible) in enumerate(cks):
        offsets = sorted(offsets)
        start = offsets[0]
        c = ck(
            start_offset=start,
            pop_time=PT + i,  # distinct CKs
            invisible_time=invisible,
            num=len(offsets),
            queue_id=queue,
            queue_offset_diff=tuple(o - start for o in offsets),
        )
        core.on_ck(c, i)
        n_acked = int(len(offsets) * acked_fraction)
        acked = data.draw(st.permutations(offsets))[:n_acked]
        if batch and acked:
            core.on_ack(ack(tuple(acked), start_offset=start, pop_time=PT + i, queue_id=queue))
        else:
            for o in acked:
                core.on_ack(ack((o,), start_offset=start, pop_time=PT + i, queue_id=queue))
        rest = tuple(o for o in offsets if o not in acked)
        if rest and PT + now_delta >= c.revive_time:
            expected[i] = rest
    got = {r.ck_offset: r.offsets for r in core.due(PT + now_delta)}
    assert got == expected
    pending_offsets = [i for i, (_, offsets, _) in enumerate(cks)]
    assert core.revive_offset() >= 0
    for r in core.due(PT + now_delta):
        core.revived(r.key)
    assert core.due(PT + now_delta) == []
    assert core.revive_offset() in (*pending_offsets, core.read_offset)


@given(
    st.integers(0, 50),
    st.integers(0, 40),
    st.one_of(st.just(()), st.lists(st.integers(-2, 40), max_size=40).map(tuple)),
)
def test_a_cks_ack_bits_are_index_of_ack_of_every_offset(
    start: int, num: int, diffs: tuple[int, ...]
) -> None:
    """The revive's offset -> bit map (`ack_bits`) answers as `index_of_ack` does for every
    offset, held or not (repeated and negative diffs included)."""
    ck = PopCheckPoint(
        start_offset=start,
        pop_time=1,
        invisible_time=1,
        num=num,
        queue_id=0,
        topic="T",
        cid="G",
        broker_name="b",
        queue_offset_diff=diffs,
    )
    bits = ck.ack_bits()
    for offset in range(start - 3, start + 45):
        assert bits.get(offset, -1) == ck.index_of_ack(offset)
