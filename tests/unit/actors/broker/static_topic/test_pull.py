"""Pulling a logic queue (S4; pure): which generation a logic offset reads, and the physical
answer rewritten to logic offsets with OffsetDelta."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.static_topic.pull import (
    PullAnswer,
    PullPlan,
    logic_response,
    plan_pull,
    rewrite_pull,
)
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import PullMessageResponseHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from rocketrio.protocol.static_topic import LogicQueueMappingItem as Item
from rocketrio.protocol.static_topic import TopicQueueMappingDetail

# logic queue 0: gen 0 on a (physical queue 1, 37 messages, sealed), gen 1 on c from 10000;
# logic queue 1: led by a, one generation
OLD = Item(0, 1, "a", 0, 0, 37)
NEW = Item(1, 2, "c", 10000, 0, -1)


def detail(bname: str) -> TopicQueueMappingDetail:
    return TopicQueueMappingDetail(
        "ST",
        totalQueues=2,
        bname=bname,
        epoch=2,
        hostedQueues={0: [OLD, NEW], 1: [Item(0, 0, "a", 0)]},
    )


def plan(logic: int, bname: str = "c", gid: int = 0, max_msgs: int = 32) -> PullPlan:
    p = plan_pull(detail(bname), gid, logic, max_msgs)
    assert isinstance(p, PullPlan), p
    return p


def test_only_the_leader_serves_a_logic_queue() -> None:
    out = plan_pull(detail("a"), 0, 0, 32)  # a holds gen 0 but no longer leads queue 0
    assert isinstance(out, Refusal) and out.code == RC.NOT_LEADER_FOR_QUEUE
    out = plan_pull(detail("c"), 1, 0, 32)  # c knows nothing of queue 1
    assert isinstance(out, Refusal) and out.code == RC.NOT_LEADER_FOR_QUEUE


@pytest.mark.parametrize(
    ("logic", "item", "physical", "max_msgs", "leader"),
    [
        (0, OLD, 0, 32, False),  # the old generation, on another broker: a remote read
        (30, OLD, 30, 7, False),  # never past the old generation's end
        (10000, NEW, 0, 32, True),
        (10005, NEW, 5, 32, True),
    ],
)
def test_a_logic_offset_reads_its_generation(
    logic: int, item: Item, physical: int, max_msgs: int, leader: bool
) -> None:
    p = plan(logic)
    assert (p.item, p.physical_offset, p.max_msgs, p.leader) == (item, physical, max_msgs, leader)


@pytest.mark.parametrize("logic", [37, 38, 5000, 9999])
def test_the_end_of_a_generation_and_the_hole_after_it_lead_to_the_next(logic: int) -> None:
    out = plan_pull(detail("c"), 0, logic, 32)
    assert out == PullAnswer(RC.PULL_RETRY_IMMEDIATELY, 10000, 0, 10000)


def test_an_offset_before_the_first_generation_moves_to_it() -> None:
    # upstream #5493: the first generation starts at logic 500 (an older one was cleaned)
    d = detail("c")
    d.hostedQueues[0] = [Item(0, 1, "a", 500, 0, 37), NEW]
    out = plan_pull(d, 0, 3, 32)
    assert isinstance(out, PullAnswer) and out.code == RC.PULL_OFFSET_MOVED
    assert out.next_offset == 500


def test_found_on_the_old_generation_carries_the_offset_delta() -> None:
    h = rewrite_pull(plan(30), RC.SUCCESS, 32, 0, 37)
    assert (h.code, h.next_offset, h.min_offset, h.max_offset, h.offset_delta) == (
        RC.SUCCESS,
        32,
        0,
        10000,
        0,
    )
    h = rewrite_pull(plan(10005), RC.SUCCESS, 9, 0, 9)
    assert (h.next_offset, h.min_offset, h.max_offset, h.offset_delta) == (
        10009,
        10000,
        10009,
        10000,
    )


def test_reading_an_old_generation_to_its_end_continues_into_the_next() -> None:
    h = rewrite_pull(plan(30), RC.SUCCESS, 37, 0, 37)
    assert h.code == RC.SUCCESS and h.next_offset == 10000
    # an old generation whose data stops short of its end (lost): next generation
    h = rewrite_pull(plan(30), RC.PULL_NOT_FOUND, 30, 0, 30)
    assert (h.code, h.next_offset) == (RC.PULL_RETRY_IMMEDIATELY, 10000)


def test_data_gone_below_the_asked_offset() -> None:
    # the old generation lost its first 20 messages (retention): moved to the first valid
    h = rewrite_pull(plan(3), RC.PULL_OFFSET_MOVED, 20, 20, 37)
    assert (h.code, h.next_offset) == (RC.PULL_OFFSET_MOVED, 20)
    # the same on a later generation: retry at once (not moved: the earlier ones count)
    h = rewrite_pull(plan(10001), RC.PULL_OFFSET_MOVED, 4, 4, 9)
    assert (h.code, h.next_offset) == (RC.PULL_RETRY_IMMEDIATELY, 10004)


def test_caught_up_on_the_leader_stays_there() -> None:
    h = rewrite_pull(plan(10009), RC.PULL_NOT_FOUND, 9, 0, 9)
    assert (h.code, h.next_offset, h.max_offset) == (RC.PULL_NOT_FOUND, 10009, 10009)


@settings(max_examples=200, deadline=None)
@given(
    counts=st.lists(st.integers(0, 30), min_size=1, max_size=4),
    block=st.integers(1, 40),
    batch=st.integers(1, 8),
    removed=st.integers(0, 10),
)
def test_reading_a_logic_queue_from_zero_yields_every_message_once_in_order(
    counts: list[int], block: int, batch: int, removed: int
) -> None:
    """Generations of ``counts`` messages (the last one open), each new one starting at the
    next ``block`` boundary; the first ``removed`` messages of the oldest are gone. Following
    the answers' next offsets from 0 reads every remaining message once, in order, with the
    logic offset physical + OffsetDelta."""
    items, expected, logic = [], [], 0
    for gen, n in enumerate(counts):
        last = gen == len(counts) - 1
        items.append(Item(gen, gen, f"b{gen}", logic, 0, -1 if last else n))
        expected += [logic + i for i in range(n)]
        logic = -(-(logic + n) // block) * block if not last else logic
        if not last and logic == items[-1].logicOffset + n and n == 0:
            logic += block  # strictly increasing logic offsets even for an empty generation
    removed = min(removed, counts[0])
    expected = expected[removed:]
    d = TopicQueueMappingDetail(
        "ST", totalQueues=1, bname=f"b{len(counts) - 1}", epoch=1, hostedQueues={0: items}
    )
    mins = {0: removed}
    got: list[int] = []
    offset = 0
    for _ in range(500):
        p = plan_pull(d, 0, offset, batch)
        if isinstance(p, PullAnswer):
            assert p.next_offset >= offset or p.code == RC.PULL_OFFSET_MOVED
            if p.code == RC.PULL_NOT_FOUND:
                break
            offset = p.next_offset
            continue
        assert isinstance(p, PullPlan)
        gen = p.item.gen
        lo, hi = mins.get(gen, 0), counts[gen]
        if p.physical_offset < lo:
            code, nxt = RC.PULL_OFFSET_MOVED, lo
        elif p.physical_offset >= hi:
            code, nxt = RC.PULL_NOT_FOUND, p.physical_offset
        else:
            code = RC.SUCCESS
            nxt = min(p.physical_offset + p.max_msgs, hi)
        h = rewrite_pull(p, code, nxt, lo, hi)
        if h.code == RC.SUCCESS:  # the records' physical offsets + the answer's OffsetDelta
            got += [x + h.offset_delta for x in range(p.physical_offset, nxt)]
        if h.code == RC.PULL_NOT_FOUND and p.leader:
            break
        assert h.next_offset > offset or h.code == RC.PULL_OFFSET_MOVED
        offset = h.next_offset
    assert got == expected


def test_a_logic_pull_never_suggests_a_replica() -> None:
    """A slave holds no mapping: a consumer sent there would read the physical queue with the
    logic id. The answer always names the master, whatever the physical pull suggested."""
    req = RemotingCommand(RequestCode.PULL_MESSAGE, opaque=7)
    phys = req.make_response(
        RC.SUCCESS,
        None,
        to_ext(PullMessageResponseHeader(1, 32, 0, 37)),
        b"",
    )
    out = logic_response(req, phys, plan(30))
    h = from_ext(PullMessageResponseHeader, out.ext_fields)
    assert (h.suggestWhichBrokerId, h.nextBeginOffset, h.offsetDelta) == (0, 32, 0)
