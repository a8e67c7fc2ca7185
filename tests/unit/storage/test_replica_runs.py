"""What a slave dispatches for the records it holds (`dispatch_request.replica_runs`): the
compiled twin (`rocketrio.protocol._speedups.replica_runs`, protocol/speedups/replica_runs.c)
against the pure-Python reference (`replica_runs_py`, which is `DispatchRequests.of_fields`
and the grouping of `StoreDispatch.dispatch`).

For any run of RecordFields the product's path must give what the reference gives: the same
ConsumeQueue entries per queue, the same index hashes and offsets, or the same exception. The
runs mix ordinary records with what the reference treats apart (delay and timer topics,
transaction halves and rollbacks, non-ASCII or non-UTF-8 tags, queue offsets that jump, fields
out of their width) and properties that hit the look-ups' corner cases.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol import compiled
from rocketrio.storage import dispatch_request
from rocketrio.storage.dispatch_request import DispatchRequests
from tests.harness.speedups import extension_in


@pytest.fixture(scope="module")
def ext() -> Iterator[Any]:
    """The extension, even in a run that asked for pure Python."""
    with extension_in(dispatch_request) as loaded:
        yield loaded


def test_the_extension_is_built_and_used(ext: Any) -> None:
    assert hasattr(ext, "replica_runs")
    if compiled.speedups is not None:  # the product's choice at import (not pure Python)
        assert compiled.speedups is ext


ORDINARY_TOPICS = ["T", "TopicA", "é"]
topics = st.sampled_from([*ORDINARY_TOPICS, "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", "\ud800"])
prop_atoms = st.sampled_from(
    [
        b"TAGS\x01a\x02", b"TAGS\x01TagA\x02", b"TAGS\x01\xc3\xa9\x02", b"TAGS\x01\xff\x02",
        b"TAGS\x01\x02", b"KEYS\x01k1 k2\x02", b"KEYS\x01 k3  \x02", b"KEYS\x01\x02",
        b"UNIQ_KEY\x01U1\x02", b"UNIQ_KEY\x01\x02", b"DELAY\x013\x02", b"TIMER_OUT_MS\x0199\x02",
        b"x\x01y\x02", b"\x02", b"\x01", b"TAGS\x01", b"KEYS\x01kk",
    ]
)  # fmt: skip
props = st.lists(prop_atoms, max_size=5).map(b"".join)
ordinary_props = st.lists(
    st.sampled_from([b"TAGS\x01a\x02", b"KEYS\x01k1 k2\x02", b"UNIQ_KEY\x01U1\x02", b"x\x01y\x02"]),
    max_size=3,
).map(b"".join)


@st.composite
def runs(draw: st.DrawFn, ordinary: bool = False) -> list[tuple[Any, ...]]:
    """RecordFields in CommitLog order; queue offsets contiguous per queue unless a jump is
    drawn."""
    n = draw(st.integers(0, 12))
    offset = draw(st.integers(0, 2**40))
    next_qo: dict[tuple[str, int], int] = {}
    out: list[tuple[Any, ...]] = []
    for _ in range(n):
        topic = draw(st.sampled_from(ORDINARY_TOPICS) if ordinary else topics)
        queue_id = draw(st.integers(0, 3))
        key = (topic, queue_id)
        qo = next_qo.setdefault(key, draw(st.integers(0, 2**40)))
        if not ordinary and draw(st.integers(0, 15)) == 0:
            qo += draw(st.sampled_from([-1, 1, 5]))  # a jump
        sys_flag = 0 if ordinary else draw(st.sampled_from([0, 0, 4, 8, 12, 48]))
        size = draw(st.integers(111, 5000))
        if not ordinary and draw(st.integers(0, 30)) == 0:
            size = 2**31  # out of the entry's int32
        if sys_flag & 0xC not in (4, 12):
            next_qo[key] = qo + 1
        record_props = draw(ordinary_props if ordinary else props)
        out.append((offset, size, topic, queue_id, qo, sys_flag, 1_700_000_000_000, record_props))
        offset += size
    return out


def outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", fn(*args))
    except Exception as e:  # the class and the text are what must agree
        return ("raised", type(e), str(e))


@settings(max_examples=400, deadline=None)
@given(items=runs(), indexed=st.booleans())
def test_replica_runs_twins_agree(ext: Any, items: list[tuple[Any, ...]], indexed: bool) -> None:
    requests = DispatchRequests([1000, 5000, 10000], indexed=indexed)
    want = outcome(dispatch_request.replica_runs_py, items, requests)
    assert outcome(dispatch_request.replica_runs, items, requests) == want
    taken = ext.replica_runs(items, indexed)
    if taken is not None:
        assert ("ok", taken) == want


@settings(max_examples=200, deadline=None)
@given(items=runs(ordinary=True), indexed=st.booleans())
def test_the_twin_takes_a_run_of_ordinary_records(
    ext: Any, items: list[tuple[Any, ...]], indexed: bool
) -> None:
    requests = DispatchRequests([1000], indexed=indexed)
    assert ("ok", ext.replica_runs(items, indexed)) == outcome(
        dispatch_request.replica_runs_py, items, requests
    )


def test_a_run_keeps_its_queues_in_order_of_first_appearance(ext: Any) -> None:
    """Interleaved queues, a transaction half and a rollback (no entry), a committed half, keys
    to index (one rollback: never indexed): the entries and hashes on both paths."""
    props = b"TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U\x02"
    items = [
        (0, 200, "T", 1, 7, 0, 1, props),
        (200, 200, "T", 0, 3, 0, 1, props),
        (400, 200, "T", 1, 8, 4, 1, props),  # a half: indexed, no entry
        (600, 200, "T", 1, 8, 8, 1, props),  # its commit
        (800, 200, "T", 0, 4, 12, 1, props),  # a rollback: neither
    ]
    requests = DispatchRequests([1000], indexed=True)
    runs_, hashes, offsets = ext.replica_runs(items, True)
    assert (runs_, hashes, offsets) == dispatch_request.replica_runs_py(items, requests)
    assert [(key, first) for key, first, _ in runs_] == [(("T", 1), 7), (("T", 0), 3)]
    assert [len(entries) // 20 for _, _, entries in runs_] == [2, 1]
    assert offsets == [0] * 3 + [200] * 3 + [400] * 3 + [600] * 3


def test_the_twin_declines_what_is_not_a_list_of_fields(ext: Any) -> None:
    assert ext.replica_runs((), True) is None
    assert ext.replica_runs([(0, 1, "T")], True) is None
    assert ext.replica_runs([(0, 200, b"T", 0, 0, 0, 0, b"")], True) is None


@pytest.mark.parametrize("jump", [-1, 1, 2**40])
def test_a_queue_offset_jump_is_the_references_error(ext: Any, jump: int) -> None:
    items = [(0, 200, "T", 0, 5, 0, 1, b""), (200, 200, "T", 0, 6 + jump, 0, 1, b"")]
    requests = DispatchRequests([1000], indexed=True)
    want = outcome(dispatch_request.replica_runs_py, items, requests)
    assert want[0] == "raised" and "jump to" in want[2]
    assert outcome(dispatch_request.replica_runs, items, requests) == want
