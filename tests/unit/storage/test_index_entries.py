"""The key index's entries of a run of keys (`index_segment._index_entries_py`, the loop of
`IndexSegment.append`) against its compiled twin (`rocketrio.protocol._speedups.index_entries`,
protocol/speedups/index_append.c): the same entry bytes, the same new count, the same slot table
and dirty pages after, or the same exception with the table changed the same way. Both paths
also run under a whole `MessageIndex` (parametrized)."""

from __future__ import annotations

import mmap
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.storage import index_segment
from rocketrio.storage.index_file import MessageIndex
from tests.harness.speedups import extension_in


@pytest.fixture(scope="module")
def ext() -> Iterator[Any]:
    with extension_in(index_segment) as loaded:
        yield loaded


def test_the_extension_is_built(ext: Any) -> None:
    assert hasattr(ext, "index_entries")


u32 = st.integers(0, 2**32 - 1)
odd = st.sampled_from([-1, 2**32, 2**63, -(2**63) - 1])


@st.composite
def runs(draw: st.DrawFn) -> tuple[Any, ...]:
    ns = draw(st.sampled_from([1, 7, 1024, 1025, 3000]))
    n = draw(st.integers(0, 30))
    his = draw(st.lists(u32, min_size=n, max_size=n))
    los = draw(st.lists(u32, min_size=n, max_size=n))
    offsets = draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n))
    if n and draw(st.integers(0, 5)) == 0:  # one value out of its width
        which = draw(st.sampled_from([his, los, offsets]))
        which[draw(st.integers(0, n - 1))] = draw(odd)
    a = draw(st.integers(0, n))
    b = draw(st.integers(a, n))
    count = draw(st.sampled_from([0, 5, 2**32 - 40, 2**32 - 1]))
    slots = draw(st.integers(0, 2**32))  # the seed of the slot table's values
    pages = -(-ns // 1024) - draw(st.sampled_from([0, 0, 0, 1]))
    return ns, his, los, offsets, a, b, count, slots, pages


def run(fn: Any, case: tuple[Any, ...]) -> tuple[Any, ...]:
    ns, his, los, offsets, a, b, count, seed, pages = case
    slots = memoryview(mmap.mmap(-1, 4 * ns)).cast("I")  # as `_slot_table` makes it
    slots[:] = memoryview(bytearray(random.Random(seed).randbytes(4 * ns))).cast("I")
    dirty = bytearray(pages)
    try:
        got: tuple[Any, ...] = ("ok", fn(slots, dirty, ns, his, los, offsets, a, b, count))
    except Exception as e:  # the class and the text are what must agree
        got = ("raised", type(e), str(e))
    return got, slots.tobytes(), bytes(dirty)


@settings(max_examples=200, deadline=None)
@given(case=runs())
def test_index_entries_twins_agree(ext: Any, case: tuple[Any, ...]) -> None:
    want = run(index_segment._index_entries_py, case)

    def product(*args: Any) -> Any:
        got = ext.index_entries(*args)
        return index_segment._index_entries_py(*args) if got is None else got

    assert run(product, case) == want
    ns, his, los, offsets, a, b, count, _, pages = case
    sound = (
        count + b - a <= 2**32 - 1
        and pages == -(-ns // 1024)
        and all(0 <= v < 2**32 for v in his[a:b] + los[a:b])
        and all(-(2**63) <= v < 2**63 for v in offsets[a:b])
    )
    if sound:  # the twin takes every sound run
        assert run(ext.index_entries, case) == want


@pytest.mark.parametrize("compiled_path", [False, True])
def test_an_index_finds_its_keys_on_each_path(
    tmp_path: Any, ext: Any, compiled_path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys added in runs that fill and roll small index files are all found, newest first."""
    monkeypatch.setattr(index_segment, "_speedups", ext if compiled_path else None)
    index = MessageIndex(str(tmp_path), max_hash_slot_num=5, max_index_num=40)
    index.open(2**62)
    for start in range(0, 300, 30):
        keys = [f"k{i % 17}".encode() for i in range(start, start + 30)]
        index.add_keys("T", keys, list(range(start, start + 30)))
    for k in range(17):
        assert index.lookup("T", f"k{k}") == sorted(range(k, 300, 17), reverse=True)
    index.close()
