"""The slave's truncation algorithm (actors/broker/ha/truncation.py).

Table rows: upstream EpochFileCacheTest's four samples and the hazards of the facts sheet.
Property: on random replicated histories (elections, writes, partial syncs, crashes that lose a
log tail), the cut is EXACTLY the longest common prefix of the two logs, so a slave never keeps
a byte the master does not have and never drops one it does.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.ha.truncation import (
    DiscardAll,
    TruncateTo,
    find_consistent_point,
    plan_truncation,
)
from rocketrio.storage.epoch_file import EpochRecord


def recs(*pairs: tuple[int, int]) -> list[EpochRecord]:
    return [EpochRecord(e, s) for e, s in pairs]


@pytest.mark.parametrize(
    ("local", "local_max", "master", "master_max", "expected"),
    [
        # upstream EpochFileCacheTest samples (answers 450, 600, -1 and 700)
        (recs((1, 100), (2, 300), (3, 500)), 700, recs((1, 100), (2, 300), (3, 450)), 700, 450),
        (recs((1, 100), (2, 300), (3, 500)), 700, recs((1, 100), (2, 300), (3, 500)), 600, 600),
        (recs((1, 100), (2, 300), (3, 500)), 700, recs((4, 100), (5, 300)), 700, None),
        (recs((1, 100), (2, 300), (3, 500)), 700, recs((1, 100), (2, 300), (3, 500)), 800, 700),
        # slave ahead within the same epoch: it drops its extra bytes
        (recs((1, 0)), 1200, recs((1, 0)), 1000, 1000),
        # a newer local epoch the master never had is skipped
        (recs((1, 0), (2, 900)), 1100, recs((1, 0), (3, 1000)), 1500, 900),
        # same epoch, different start: skipped, the older epoch decides
        (recs((1, 0), (2, 500)), 800, recs((1, 0), (2, 600)), 900, 500),
        # an entry starting beyond the local end (crash between cutting log and epoch file)
        (recs((1, 0), (2, 900)), 700, recs((1, 0), (3, 800)), 1000, 700),
    ],
)
def test_consistent_point(local, local_max, master, master_max, expected) -> None:
    found = find_consistent_point(local, local_max, master, master_max)
    assert (None if found is None else found[0]) == expected


def test_plan_for_an_empty_log_keeps_it() -> None:
    assert plan_truncation(recs((1, 0)), 0, 0, recs((1, 0), (2, 50)), 90) == TruncateTo(0, None)


def test_data_without_epochs_is_not_trusted() -> None:
    plan = plan_truncation([], 0, 500, recs((1, 0)), 900)
    assert isinstance(plan, DiscardAll) and "epoch file is empty" in plan.reason


def test_no_common_epoch_discards_instead_of_failing_forever() -> None:
    plan = plan_truncation(recs((1, 0), (2, 300)), 0, 700, recs((4, 1000)), 2000)
    assert isinstance(plan, DiscardAll) and "no epoch in common" in plan.reason


def test_common_range_below_our_oldest_data_discards() -> None:
    # our retention removed [0, 1000); we share only epoch 1, which ends at 500 on our side
    plan = plan_truncation(recs((1, 0), (2, 500)), 1000, 2000, recs((1, 0), (3, 800)), 3000)
    assert isinstance(plan, DiscardAll) and "below our oldest data" in plan.reason


# --------------------------------------------------------------------------- the model


class Replica:
    """A log as the epoch of every unit (one unit = one record) plus its epoch file."""

    def __init__(self) -> None:
        self.labels: list[int] = []
        self.epochs: list[EpochRecord] = []

    def truncate(self, n: int) -> None:
        del self.labels[n:]
        # the store cuts the epoch file with the log: entries starting at or after the cut go
        self.epochs = [r for r in self.epochs if r.start_offset < n]

    def crash_lose_tail(self, k: int) -> None:
        # unflushed records lost; recovery drops epoch entries that start beyond the log end
        del self.labels[max(0, len(self.labels) - k) :]
        self.epochs = [r for r in self.epochs if r.start_offset <= len(self.labels)]


def containing(epochs: list[EpochRecord], offset: int) -> EpochRecord:
    return [r for r in epochs if r.start_offset <= offset][-1]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def sync(slave: Replica, master: Replica, upto: int) -> tuple[object, int]:
    """Handshake + truncation + transfer of master units up to ``upto``, as the cores do it."""
    lcp = common_prefix(slave.labels, master.labels)
    plan = plan_truncation(slave.epochs, 0, len(slave.labels), master.epochs, len(master.labels))
    if isinstance(plan, TruncateTo):
        slave.truncate(plan.offset)
    else:
        slave.truncate(0)
        slave.epochs = []
    for p in range(len(slave.labels), max(upto, len(slave.labels))):
        entry = containing(master.epochs, p)
        assert entry.epoch == master.labels[p], "the master's epoch file must label its log"
        if not slave.epochs or slave.epochs[-1].epoch != entry.epoch:
            slave.epochs.append(entry)
        slave.labels.append(master.labels[p])
    if upto >= len(master.labels) and master.epochs:
        last = master.epochs[-1]  # a heartbeat announces an epoch with no data yet
        if not slave.epochs or slave.epochs[-1].epoch < last.epoch:
            slave.epochs.append(last)
    return plan, lcp


steps = st.lists(
    st.one_of(
        st.tuples(st.just("elect"), st.integers(0, 2)),
        st.tuples(st.just("write"), st.integers(1, 4)),
        st.tuples(st.just("sync"), st.integers(0, 2), st.integers(0, 40)),
        st.tuples(st.just("crash"), st.integers(0, 2), st.integers(0, 4)),
    ),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(steps)
def test_the_cut_is_exactly_the_common_prefix(script) -> None:
    replicas = [Replica() for _ in range(3)]
    master: int | None = None
    epoch = 0
    for step in script:
        match step:
            case ("elect", m):
                # a new master: a NEW epoch starting at its log end (never resume an old one)
                epoch += 1
                master = m
                replicas[m].epochs.append(EpochRecord(epoch, len(replicas[m].labels)))
            case ("write", k) if master is not None:
                replicas[master].labels += [epoch] * k
            case ("sync", s, upto) if master is not None and s != master:
                m = replicas[master]
                plan, lcp = sync(replicas[s], m, min(upto, len(m.labels)))
                if isinstance(plan, TruncateTo):
                    assert plan.offset == lcp
                else:
                    assert lcp == 0
                assert replicas[s].labels == m.labels[: len(replicas[s].labels)]
            case ("crash", r, k):
                replicas[r].crash_lose_tail(k)
                if r == master:
                    master = None  # it must be re-elected (with a new epoch) to write again
            case _:
                pass


def test_resuming_an_epoch_after_a_restart_would_hide_divergence() -> None:
    """Why role_core refuses to let a restarted master write again in its old epoch."""
    m, s = Replica(), Replica()
    m.epochs.append(EpochRecord(1, 0))
    m.labels += [1] * 5
    sync(s, m, 5)  # the slave holds all 5 units of epoch 1
    m.crash_lose_tail(2)  # the master comes back with 3
    m.labels += [1] * 2  # ...and (wrongly) writes 2 NEW units labelled epoch 1 again
    plan = plan_truncation(s.epochs, 0, len(s.labels), m.epochs, len(m.labels))
    # the algorithm sees one agreeing epoch and keeps units 3 and 4, which now differ
    assert plan == TruncateTo(5, 1)
