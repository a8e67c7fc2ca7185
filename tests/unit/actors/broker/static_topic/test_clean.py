"""The pure clean-up decisions of static topics (S4, upstream TopicQueueMappingCleanService):
which generations a leader drops, what a broker that no longer leads follows, and the
mapping table's same-epoch `clean`."""

from __future__ import annotations

from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingManager
from rocketrio.protocol.static_topic import LogicQueueMappingItem as Item
from rocketrio.protocol.static_topic import TopicQueueMappingDetail
from rocketrio.protocol.static_topic_alloc import follow_leader, generations_read_by_all

# queue 0 remapped three times: a (5 messages), b, c, then d leads
CHAIN = [
    Item(0, 0, "a", 0, 0, 5),
    Item(1, 0, "b", 10000, 0, 5),
    Item(2, 0, "c", 20000, 0, 5),
    Item(3, 0, "d", 30000, 0, -1),
]


def test_a_generation_more_than_two_behind_goes_once_every_group_read_it() -> None:
    assert generations_read_by_all(CHAIN, []) == 1  # nobody reads: gen 0 goes, gen 1 stays
    assert generations_read_by_all(CHAIN, [5, 30002]) == 1  # every group is past its end
    assert generations_read_by_all(CHAIN, [4, 30002]) is None  # one group has not read it all
    assert generations_read_by_all(CHAIN, [0]) is None
    # two generations behind is kept; the leader itself always
    assert generations_read_by_all(CHAIN[1:], []) is None
    assert generations_read_by_all(CHAIN[-1:], []) is None
    # an unsealed old generation (its end unknown) is kept
    unsealed = [Item(0, 0, "a", 0, 0, -1), *CHAIN[1:]]
    assert generations_read_by_all(unsealed, []) is None
    # five generations: the two oldest go together, the list stays contiguous
    longer = [*CHAIN, Item(4, 1, "a", 40000, 0, -1)]
    longer[3] = Item(3, 0, "d", 30000, 0, 5)
    assert generations_read_by_all(longer, [40000]) == 2
    assert generations_read_by_all(longer, [7000]) == 1  # gen 0 read, gen 1 not: gen 0 only


def detail(bname: str, items: list[Item], epoch: int = 9) -> TopicQueueMappingDetail:
    return TopicQueueMappingDetail(
        "T", totalQueues=1, bname=bname, epoch=epoch, hostedQueues={0: items}
    )


def test_a_broker_that_no_longer_leads_follows_the_leader_it_knows() -> None:
    d = detail("d", CHAIN[1:])  # d cleaned gen 0
    c = detail("c", CHAIN)
    assert follow_leader(c, 0, d) == 1  # c drops what its leader d dropped
    assert follow_leader(c, 0, detail("d", CHAIN)) is None  # nothing dropped there yet
    b = detail("b", CHAIN[:3])  # b knows c, but c's own list says d leads
    assert follow_leader(b, 0, c) == "drop"
    # a knows b, which dropped its list the same way: a is behind too
    assert follow_leader(detail("a", CHAIN[:2]), 0, detail("b", [])) == "drop"
    # answers that cannot be trusted change nothing
    assert follow_leader(c, 0, None) is None
    assert follow_leader(c, 0, detail("x", CHAIN[1:])) is None  # names another broker
    assert follow_leader(c, 0, detail("d", CHAIN[1:], epoch=8)) is None  # older epoch
    other_total = detail("d", CHAIN[1:])
    other_total.totalQueues = 2
    assert follow_leader(c, 0, other_total) is None
    assert follow_leader(detail("d", CHAIN[1:]), 0, d) is None  # a leader follows nobody


def test_clean_keeps_the_epoch_and_never_cuts_the_leader() -> None:
    m = TopicQueueMappingManager("c", lambda: 1)
    m.table["T"] = detail("c", CHAIN)
    version = m.data_version
    assert not m.clean("T", 8, {0: 1})  # decided on another epoch: nothing applied
    assert m.clean("T", 9, {0: 1})
    assert [i.gen for i in m.table["T"].hostedQueues[0]] == [1, 2, 3]
    assert m.table["T"].epoch == 9 and m.data_version != version
    assert not m.clean("T", 9, {0: 4})  # past the last item: refused
    assert m.clean("T", 9, {0: None})  # the whole list
    assert m.table["T"].hostedQueues == {}
