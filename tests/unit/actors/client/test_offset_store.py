"""Broadcasting offsets in a local file: format, atomic persist, reload, bad files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.offset_store import (
    LocalFileOffsetStore,
    decode_offsets,
    default_offsets_path,
    encode_offsets,
)
from rocketrio.actors.client.process_queue import OffsetTable
from rocketrio.protocol.bodies import MessageQueue

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-b", 3)


async def inline(fn: Callable[[], Any]) -> Any:
    return fn()


def test_encode_decode_round_trip() -> None:
    t = OffsetTable()
    t.update(MQ1, 9, increase_only=False)
    t.update(MQ0, 4, increase_only=False)
    assert decode_offsets(encode_offsets(t), "x") == {MQ0: 4, MQ1: 9}


@pytest.mark.parametrize("data", [b"", b"{}", b'{"offsetTable": [{"topic": "T"}]}', b"[1]"])
def test_bad_file_is_a_clear_error(data: bytes) -> None:
    with pytest.raises(MQClientError, match=r"offsets\.json"):
        decode_offsets(data, "offsets.json")


def test_default_path_is_per_client_and_group() -> None:
    p = default_offsets_path("10.0.0.1@123#0", "g")
    assert p.endswith("/.rocketmq_offsets/10.0.0.1@123#0/g/offsets.json")


async def test_persist_only_the_given_queues_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "c" / "offsets.json"
    store = LocalFileOffsetStore(str(path), inline)
    await store.load()  # no file yet
    assert await store.read_from_store(MQ0) == -1
    store.table.update(MQ0, 5, increase_only=True)
    store.table.update(MQ1, 7, increase_only=True)
    await store.persist([MQ0])
    again = LocalFileOffsetStore(str(path), inline)
    await again.load()
    assert await again.fetch(MQ0) == 5
    assert await again.fetch(MQ1) == -1
    assert await again.read_from_store(MQ0) == 5 and again.table.read(MQ0) == 5
    assert not list(tmp_path.glob("c/*.tmp"))
