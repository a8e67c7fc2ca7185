"""The broker's identity files (broker.meta, .broker.meta.temp) and epoch file (+ .bak)."""

from __future__ import annotations

from pathlib import Path

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
from rocketrio.storage.epoch_file import (
    OPEN_END_OFFSET,
    EpochFile,
    EpochFileError,
    EpochRange,
    EpochRecord,
    decode_records,
    encode_records,
)
from tests.sim.disk_view import DiskView

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


@st.composite
def epoch_lists(draw: st.DrawFn) -> list[EpochRecord]:
    epochs = sorted(draw(st.sets(st.integers(0, 10_000), max_size=8)))
    offsets = sorted(
        draw(st.lists(st.integers(0, 2**50), min_size=len(epochs), max_size=len(epochs)))
    )
    return [EpochRecord(e, o) for e, o in zip(epochs, offsets, strict=True)]


@given(epoch_lists())
def test_epoch_records_round_trip(records: list[EpochRecord]) -> None:
    assert decode_records(encode_records(records), "f") == records


def test_epoch_format_is_upstream_lines_plus_crc() -> None:
    text = encode_records([EpochRecord(1, 0), EpochRecord(3, 4096)]).decode()
    assert text.startswith("2\n1-0\n3-4096\ncrc=")


def test_append_persists_both_copies_and_reloads(disk: DiskView) -> None:
    path = disk.path("store", "epochFileCheckpoint")
    f = EpochFile(path, fs=disk.fs)
    assert f.records == [] and f.last_epoch() == -1
    assert f.append(1, 0)
    assert f.append(2, 500)
    assert not f.append(2, 500)  # the same master registering again
    again = EpochFile(path, fs=disk.fs)
    assert again.records == [EpochRecord(1, 0), EpochRecord(2, 500)]
    assert not again.loaded_from_backup
    assert disk.read(path) == disk.read(path + ".bak")
    assert again.ranges() == [EpochRange(1, 0, 500), EpochRange(2, 500, OPEN_END_OFFSET)]
    assert again.find(1) == EpochRange(1, 0, 500) and again.find(9) is None


@pytest.mark.parametrize(
    ("epoch", "start", "why"),
    [(2, 900, "cannot append 2-900"), (1, 900, "cannot append 1-900"), (3, 499, "3-499")],
)
def test_append_refuses_going_backwards(disk: DiskView, epoch: int, start: int, why: str) -> None:
    f = EpochFile(disk.path("e"), fs=disk.fs)
    f.append(1, 0)
    f.append(2, 500)
    with pytest.raises(EpochFileError, match=why):
        f.append(epoch, start)
    assert EpochFile(disk.path("e"), fs=disk.fs).records == [EpochRecord(1, 0), EpochRecord(2, 500)]


def test_damaged_main_falls_back_to_backup(disk: DiskView) -> None:
    path = disk.path("e")
    f = EpochFile(path, fs=disk.fs)
    f.append(1, 0)
    f.append(2, 100)
    disk.write(path, b"2\n1-0\n2-1")  # torn by something outside our write path
    again = EpochFile(path, fs=disk.fs)
    assert again.loaded_from_backup and again.last_epoch() == 2
    # a lone backup (main deleted) is also used
    disk.unlink(path)
    assert EpochFile(path, fs=disk.fs).records == [EpochRecord(1, 0), EpochRecord(2, 100)]


def test_both_copies_damaged_is_an_error_naming_both(disk: DiskView) -> None:
    path = disk.path("e")
    EpochFile(path, fs=disk.fs).append(1, 0)
    disk.write(path, b"garbage")
    disk.write(path + ".bak", b"1\n1-0\ncrc=00000000\n")
    with pytest.raises(EpochFileError, match=r"e: checksum mismatch.*e\.bak: checksum mismatch"):
        EpochFile(path, fs=disk.fs)


def test_bad_entries_are_rejected(disk: DiskView) -> None:
    def crc_ok(body: str) -> bytes:
        import zlib

        return (body + f"crc={zlib.crc32(body.encode()):08x}\n").encode()

    with pytest.raises(EpochFileError, match="expected 3 entries, found 1"):
        decode_records(crc_ok("3\n1-0\n"), "f")
    with pytest.raises(EpochFileError, match="does not follow"):
        decode_records(crc_ok("2\n2-0\n1-5\n"), "f")
    with pytest.raises(EpochFileError, match="malformed"):
        decode_records(crc_ok("1\n7\n"), "f")


def test_truncation_keeps_the_file_consistent(disk: DiskView) -> None:
    path = disk.path("e")
    f = EpochFile(path, fs=disk.fs)
    for epoch, start in ((1, 0), (2, 100), (4, 300)):
        f.append(epoch, start)
    f.truncate_suffix(300)  # the CommitLog was cut at 300: epoch 4 holds nothing any more
    assert f.records == [EpochRecord(1, 0), EpochRecord(2, 100)]
    f.truncate_prefix(150)  # files below 150 deleted: epoch 1 is gone, epoch 2 keeps its start
    assert f.records == [EpochRecord(2, 100)]
    assert EpochFile(path, fs=disk.fs).records == [EpochRecord(2, 100)]
    f.replace_all([EpochRecord(2, 150), EpochRecord(5, 900)])
    assert EpochFile(path, fs=disk.fs).last_record() == EpochRecord(5, 900)
    with pytest.raises(EpochFileError, match="does not follow"):
        f.replace_all([EpochRecord(5, 0), EpochRecord(3, 10)])


# --------------------------------------------------------------------------- deploy configs

ROOT = Path(__file__).resolve().parents[2]


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
