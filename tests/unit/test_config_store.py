"""Config files: atomic writes, .bak rotation and fallback, clear errors, DataVersion."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rocketrio.storage.config_store import (
    ConfigFileError,
    DataVersion,
    JsonConfigStore,
    write_json_atomic,
)


def test_write_json_atomic_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "topics.json"
    write_json_atomic(str(path), '{"a": 1}')
    write_json_atomic(str(path), b'{"a": 2}')
    assert json.loads(path.read_text()) == {"a": 2}
    assert sorted(os.listdir(path.parent)) == ["topics.json"]


def test_missing_file_gives_default(tmp_path: Path) -> None:
    store = JsonConfigStore(str(tmp_path / "topics.json"))
    assert store.load() == {}
    assert store.load(lambda: {"topicConfigTable": {}}) == {"topicConfigTable": {}}
    assert store.loaded_from is None


def test_persist_keeps_previous_version_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    store = JsonConfigStore(str(path))
    store.persist({"offsetTable": {"t@g": {"0": 1}}})
    assert not Path(store.bak_path).exists()
    store.persist({"offsetTable": {"t@g": {"0": 2}}})
    assert json.loads(path.read_text())["offsetTable"]["t@g"]["0"] == 2
    assert json.loads(Path(store.bak_path).read_text())["offsetTable"]["t@g"]["0"] == 1
    assert JsonConfigStore(str(path)).load()["offsetTable"]["t@g"]["0"] == 2


@pytest.mark.parametrize(
    ("main", "bak", "expected", "source"),
    [
        (None, '{"v": 1}', {"v": 1}, ".bak"),  # crash between the two renames
        ("", '{"v": 1}', {"v": 1}, ".bak"),  # empty main counts as missing (upstream)
        ("{broken", '{"v": 1}', {"v": 1}, ".bak"),
        (b"\xff\xfe", '{"v": 1}', {"v": 1}, ".bak"),
        ('{"v": 2}', "{broken", {"v": 2}, ""),  # a bad backup does not matter
        ("", None, {}, None),
    ],
)
def test_load_falls_back_to_bak(
    tmp_path: Path, main: str | bytes | None, bak: str | None, expected: object, source: str | None
) -> None:
    path = tmp_path / "subscriptionGroup.json"
    if main is not None:
        path.write_bytes(main.encode() if isinstance(main, str) else main)
    if bak is not None:
        Path(str(path) + ".bak").write_text(bak)
    store = JsonConfigStore(str(path))
    assert store.load() == expected
    assert store.loaded_from == (None if source is None else str(path) + source)


def test_bad_main_and_bad_or_missing_bak_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    path.write_text('{"topicConfigTable": ')
    with pytest.raises(ConfigFileError, match=f"{path} is not valid JSON"):
        JsonConfigStore(str(path)).load()
    Path(str(path) + ".bak").write_text("also broken")
    with pytest.raises(ConfigFileError, match=r"topics\.json\.bak is not valid JSON"):
        JsonConfigStore(str(path)).load()


def test_persist_over_a_damaged_main_keeps_the_good_bak(tmp_path: Path) -> None:
    path = tmp_path / "delayOffset.json"
    path.write_text("{damaged")
    Path(str(path) + ".bak").write_text('{"offsetTable": {"1": 5}}')
    store = JsonConfigStore(str(path))
    store.persist({"offsetTable": {"1": 6}})
    assert json.loads(Path(store.bak_path).read_text()) == {"offsetTable": {"1": 5}}
    assert store.load() == {"offsetTable": {"1": 6}}


def test_persist_refuses_invalid_json_text(tmp_path: Path) -> None:
    store = JsonConfigStore(str(tmp_path / "x.json"))
    with pytest.raises(ValueError):
        store.persist("{not json")
    assert not (tmp_path / "x.json").exists()


def test_data_version_next_version() -> None:
    v = DataVersion(stateVersion=3, timestamp=100, counter=7)
    nxt = v.next_version(250)
    assert (nxt.stateVersion, nxt.timestamp, nxt.counter) == (3, 250, 8)
    assert nxt != v
