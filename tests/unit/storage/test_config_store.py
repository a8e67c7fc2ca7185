"""Config files: atomic writes, .bak rotation and fallback, clear errors, DataVersion."""

from __future__ import annotations

import json

import pytest

from rocketrio.storage.config_store import (
    ConfigFileError,
    DataVersion,
    JsonConfigStore,
    write_json_atomic,
)
from tests.harness.disk_view import DiskView


def test_write_json_atomic_replaces_and_leaves_no_temp(disk: DiskView) -> None:
    path = disk.path("sub", "topics.json")
    write_json_atomic(path, '{"a": 1}', fs=disk.fs)
    write_json_atomic(path, b'{"a": 2}', fs=disk.fs)
    assert json.loads(disk.read(path)) == {"a": 2}
    assert disk.listdir(disk.path("sub")) == ["topics.json"]


def test_missing_file_gives_default(disk: DiskView) -> None:
    store = JsonConfigStore(disk.path("topics.json"), fs=disk.fs)
    assert store.load() == {}
    assert store.load(lambda: {"topicConfigTable": {}}) == {"topicConfigTable": {}}
    assert store.loaded_from is None


def test_persist_keeps_previous_version_as_bak(disk: DiskView) -> None:
    path = disk.path("consumerOffset.json")
    store = JsonConfigStore(path, fs=disk.fs)
    store.persist({"offsetTable": {"t@g": {"0": 1}}})
    assert not disk.exists(store.bak_path)
    store.persist({"offsetTable": {"t@g": {"0": 2}}})
    assert json.loads(disk.read(path))["offsetTable"]["t@g"]["0"] == 2
    assert json.loads(disk.read(store.bak_path))["offsetTable"]["t@g"]["0"] == 1
    assert JsonConfigStore(path, fs=disk.fs).load()["offsetTable"]["t@g"]["0"] == 2


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
    disk: DiskView, main: str | bytes | None, bak: str | None, expected: object, source: str | None
) -> None:
    path = disk.path("subscriptionGroup.json")
    disk.fs.makedirs(disk.root, exist_ok=True)
    if main is not None:
        disk.write(path, main.encode() if isinstance(main, str) else main)
    if bak is not None:
        disk.write(path + ".bak", bak.encode())
    store = JsonConfigStore(path, fs=disk.fs)
    assert store.load() == expected
    assert store.loaded_from == (None if source is None else path + source)


def test_bad_main_and_bad_or_missing_bak_is_a_clear_error(disk: DiskView) -> None:
    path = disk.path("topics.json")
    disk.fs.makedirs(disk.root, exist_ok=True)
    disk.write(path, b'{"topicConfigTable": ')
    with pytest.raises(ConfigFileError, match=f"{path} is not valid JSON"):
        JsonConfigStore(path, fs=disk.fs).load()
    disk.write(path + ".bak", b"also broken")
    with pytest.raises(ConfigFileError, match=r"topics\.json\.bak is not valid JSON"):
        JsonConfigStore(path, fs=disk.fs).load()


def test_persist_over_a_damaged_main_keeps_the_good_bak(disk: DiskView) -> None:
    path = disk.path("delayOffset.json")
    disk.fs.makedirs(disk.root, exist_ok=True)
    disk.write(path, b"{damaged")
    disk.write(path + ".bak", b'{"offsetTable": {"1": 5}}')
    store = JsonConfigStore(path, fs=disk.fs)
    store.persist({"offsetTable": {"1": 6}})
    assert json.loads(disk.read(store.bak_path)) == {"offsetTable": {"1": 5}}
    assert store.load() == {"offsetTable": {"1": 6}}


def test_persist_refuses_invalid_json_text(disk: DiskView) -> None:
    store = JsonConfigStore(disk.path("x.json"), fs=disk.fs)
    with pytest.raises(ValueError):
        store.persist("{not json")
    assert not disk.exists(disk.path("x.json"))


def test_data_version_next_version() -> None:
    v = DataVersion(stateVersion=3, timestamp=100, counter=7)
    nxt = v.next_version(250)
    assert (nxt.stateVersion, nxt.timestamp, nxt.counter) == (3, 250, 8)
    assert nxt != v
