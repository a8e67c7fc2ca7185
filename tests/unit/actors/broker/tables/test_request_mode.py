"""The message request modes (actors/broker/tables/request_mode.py): set/get/all, the last set
wins, messageRequestMode.json in upstream's shape written and read back by a new table (a
restart), a slave's adopt says whether anything changed, and a file that is not the shape is
an error naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.broker.tables.request_mode import (
    REQUEST_MODE_FILE,
    RequestModeManager,
    RequestModeTable,
)
from rocketrio.protocol.assignment import (
    POP,
    PULL,
    MessageRequestModeSerializeWrapper,
    SetMessageRequestModeRequestBody,
)
from rocketrio.storage.config_store import ConfigFileError
from tests.harness.blocking import inline_blocking


def body(
    topic: str, group: str, mode: str = POP, share: int = 0
) -> SetMessageRequestModeRequestBody:
    return SetMessageRequestModeRequestBody(topic, group, mode, share)


def test_unset_is_none_and_the_last_set_wins() -> None:
    m = RequestModeManager()
    assert m.get_mode("T", "G") is None
    m.set_mode(body("T", "G", POP, 2))
    m.set_mode(body("T", "G", PULL))
    m.set_mode(body("T", "H", POP))
    got = m.get_mode("T", "G")
    assert got is not None and (got.mode, got.popShareQueueNum) == (PULL, 0)
    assert sorted(m.snapshot().messageRequestModeMap["T"]) == ["G", "H"]
    assert m.get_mode("U", "G") is None


names = st.sampled_from(["T1", "T2", "%LMQ%x", "G1", "G2"])


@given(st.lists(st.tuples(names, names, st.sampled_from([PULL, POP]), st.integers(-1, 5))))
def test_adopting_a_snapshot_gives_the_same_modes(sets: list[tuple[str, str, str, int]]) -> None:
    a = RequestModeManager()
    for t, g, mode, share in sets:
        a.set_mode(body(t, g, mode, share))
    b = RequestModeManager()
    assert b.adopt(a.snapshot()) == bool(sets)
    assert b.modes == a.modes
    assert not b.adopt(a.snapshot())  # nothing changed the second time


async def test_the_file_is_upstreams_shape_and_survives_a_restart(tmp_path: Path) -> None:
    t = RequestModeTable("broker-a", str(tmp_path), run_blocking=inline_blocking)
    await t.load_file()
    t.set_mode(body("T", "G", POP, 1))
    await t.persist()
    path = tmp_path / "config" / REQUEST_MODE_FILE
    assert json.loads(path.read_text()) == {
        "messageRequestModeMap": {
            "T": {"G": {"consumerGroup": "G", "mode": "POP", "popShareQueueNum": 1, "topic": "T"}}
        }
    }
    again = RequestModeTable("broker-a", str(tmp_path), run_blocking=inline_blocking)
    await again.load_file()
    assert again.get_mode("T", "G") == body("T", "G", POP, 1)


async def test_no_file_is_no_modes_and_a_bad_file_names_itself(tmp_path: Path) -> None:
    t = RequestModeTable("broker-a", str(tmp_path), run_blocking=inline_blocking)
    await t.load_file()
    assert t.snapshot() == MessageRequestModeSerializeWrapper()
    (tmp_path / "config").mkdir(exist_ok=True)
    bad = {"messageRequestModeMap": {"T": {"G": {"topic": "T", "consumerGroup": "G", "mode": "X"}}}}
    (tmp_path / "config" / REQUEST_MODE_FILE).write_text(json.dumps(bad))
    with pytest.raises(ConfigFileError, match=REQUEST_MODE_FILE):
        await RequestModeTable("broker-a", str(tmp_path), run_blocking=inline_blocking).load_file()
