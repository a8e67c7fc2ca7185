"""The broker's identity files (broker.meta, .broker.meta.temp) and epoch file (+ .bak)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.protocol.config import load_config
from rocketrio.storage.broker_identity import (
    META_FILE,
    TEMP_FILE,
    BrokerIdentityError,
    BrokerIdentityStore,
    BrokerMeta,
)
from tests.harness.disk_view import DiskView
from tests.harness.paths import REPO

META = BrokerMeta("DefaultCluster", "broker-a", 3, "10.0.0.1:10911;1700000000000;0a0b0c0d")

# --------------------------------------------------------------------------- broker.meta


# names and codes are printable ASCII on the wire ("<addr>;<millis>;<nonce>")
@given(
    st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="="), min_size=1),
    st.integers(0, 2**40),
    st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1),
)
def test_meta_round_trip(name: str, broker_id: int, code: str) -> None:
    meta = BrokerMeta("C", name, broker_id, code)
    assert BrokerMeta.decode(meta.encode(), "f") == meta


def test_temp_then_commit_is_one_rename(disk: DiskView) -> None:
    store = BrokerIdentityStore(disk.path("id"), fs=disk.fs)
    assert store.read_meta() is None and store.read_temp() is None
    store.write_temp(META)
    assert store.read_temp() == META and store.read_meta() is None
    assert store.commit_temp() == META
    assert store.read_meta() == META and store.read_temp() is None
    assert disk.listdir(disk.path("id")) == [META_FILE]
    with pytest.raises(BrokerIdentityError, match=r"no \.broker\.meta\.temp to commit"):
        store.commit_temp()
    store.delete_temp()  # nothing to delete is fine


def test_refused_temp_is_deleted(disk: DiskView) -> None:
    store = BrokerIdentityStore(disk.root, fs=disk.fs)
    store.write_temp(META)
    store.delete_temp()
    assert store.read_temp() is None and not disk.exists(disk.path(TEMP_FILE))


def test_write_interrupted_before_rename_leaves_no_temp(disk: DiskView) -> None:
    """kill -9 during write_temp: only the side file exists, so the flow starts over."""
    disk.fs.makedirs(disk.root, exist_ok=True)
    disk.write(disk.path(TEMP_FILE + ".writing"), META.encode()[:10])
    assert BrokerIdentityStore(disk.root, fs=disk.fs).read_temp() is None


@pytest.mark.parametrize("name", [META_FILE, TEMP_FILE])
def test_damaged_identity_file_is_reported_not_trusted(disk: DiskView, name: str) -> None:
    data = bytearray(META.encode())
    data[data.index(b"brokerId=") + 9] = ord("7")  # brokerId 3 -> 7 behind the checksum
    disk.fs.makedirs(disk.root, exist_ok=True)
    disk.write(disk.path(name), bytes(data))
    store = BrokerIdentityStore(disk.root, fs=disk.fs)
    with pytest.raises(BrokerIdentityError, match="checksum mismatch"):
        store.read_meta() if name == META_FILE else store.read_temp()


def test_identity_of_another_broker_is_refused(disk: DiskView) -> None:
    store = BrokerIdentityStore(disk.root, fs=disk.fs)
    store.check_owner(META, "DefaultCluster", "broker-a")
    with pytest.raises(BrokerIdentityError, match="belongs to DefaultCluster/broker-a"):
        store.check_owner(META, "DefaultCluster", "broker-b")


# --------------------------------------------------------------------------- epoch file


# --------------------------------------------------------------------------- deploy configs

ROOT = REPO


@pytest.mark.parametrize("mode", ["controller-embedded", "controller-standalone"])
def test_controller_mode_broker_confs(mode: str) -> None:
    """Every replica of the set: controller mode on, its own ports and store (identity)."""
    paths = sorted((ROOT / "deploy" / mode).glob("broker-*.conf"))
    configs = [load_config(BrokerConfig, str(p)) for p in paths]
    assert len(configs) >= 3
    assert all(c.enableControllerMode and c.controllerAddr for c in configs)
    for attr in ("listenPort", "haListenPort", "storePathRootDir"):
        values = [getattr(c, attr) for c in configs]
        assert len(set(values)) == len(values), attr
    assert len({c.broker_identity_dir for c in configs}) == len(configs)
