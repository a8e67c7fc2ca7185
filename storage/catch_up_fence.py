"""The catch-up fence: a replica that cut its CommitLog below what it had written (a lost page
under valid records, storage/commitlog/quarantine.py) must not become master before it caught up
with a master elected after the cut, or its slaves, which may hold the bytes it cut, would be
truncated to it (acknowledged data lost).

``<storePathRootDir>/catchUpFence`` (JSON, written atomically: temp file + fsync + rename +
directory fsync) holds ``lostOffset`` (where the log was cut), ``oldEnd`` (where it had
ended), ``epoch`` (the epoch file's last MasterEpoch before the cut: the fence lifts only under
a newer one) and ``quarantine`` (the file holding the cut bytes). It is written BEFORE the log is
cut, so a crash in between still finds the broker fenced; it is removed (unlink + directory
fsync) only by the role service once the controller lists this broker in the SyncStateSet of a
newer master (actors/broker/roles/role_core.py), or by an operator who decides to serve the
cut log (docs/hardening.md).
"""

from __future__ import annotations

import json
import os

import attrs

from rocketrio.storage.commitlog.quarantine import QUARANTINE_DIR, Quarantined, quarantine_tail
from rocketrio.storage.durable import read_file, write_file_atomic
from rocketrio.storage.epoch_file import EpochFile
from rocketrio.storage.fs import OS_FS, FileSystem

FENCE_FILE = "catchUpFence"


class FenceFileError(ValueError):
    """The fence file exists but cannot be read: refuse rather than forget the fence."""


@attrs.frozen
class CatchUpFence:
    lost_offset: int
    old_end: int
    epoch: int
    quarantine: str

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "lostOffset": self.lost_offset,
                "oldEnd": self.old_end,
                "epoch": self.epoch,
                "quarantine": self.quarantine,
            },
            sort_keys=True,
        ).encode()


def fence_path(store_root: str) -> str:
    return os.path.join(store_root, FENCE_FILE)


def load_fence(store_root: str, *, fs: FileSystem = OS_FS) -> CatchUpFence | None:
    """The fence, or None when there is none."""
    path = fence_path(store_root)
    if not fs.exists(path):
        return None
    try:
        d = json.loads(read_file(path, fs=fs))
        return CatchUpFence(
            int(d["lostOffset"]), int(d["oldEnd"]), int(d["epoch"]), str(d["quarantine"])
        )
    except (ValueError, KeyError, TypeError) as e:
        raise FenceFileError(
            f"{path} is damaged ({e}): this broker's CommitLog was cut after a lost page and "
            "must catch up from a master before it may be elected; fix or remove the file "
            "(see docs/hardening.md) to start"
        ) from None


def save_fence(store_root: str, fence: CatchUpFence, *, fs: FileSystem = OS_FS) -> None:
    """Durably (re)write the fence, merged with an existing one (lowest cut, highest end and
    epoch)."""
    old = load_fence(store_root, fs=fs)
    if old is not None:
        fence = attrs.evolve(
            fence,
            lost_offset=min(old.lost_offset, fence.lost_offset),
            old_end=max(old.old_end, fence.old_end),
            epoch=max(old.epoch, fence.epoch),
        )
    write_file_atomic(fence_path(store_root), fence.to_json(), fs=fs)


def clear_fence(store_root: str, *, fs: FileSystem = OS_FS) -> None:
    """Remove the fence durably (unlink + directory fsync)."""
    path = fence_path(store_root)
    if fs.exists(path):
        fs.unlink(path)
        fs.fsync_dir(store_root)


def quarantine_lost_tail(
    store_root: str,
    commitlog_dir: str,
    segment_size: int,
    offset: int,
    *,
    epoch_file_path: str | None,
    fence: bool,
    fs: FileSystem = OS_FS,
) -> Quarantined:
    """Move the CommitLog from ``offset`` into ``<store_root>/quarantine`` and cut it there; with
    ``fence`` the catch-up fence is durable before the cut (its epoch: the epoch file's last,
    read before anything is cut)."""
    epoch = -1 if epoch_file_path is None else EpochFile(epoch_file_path, fs=fs).last_epoch()

    def write_fence(q: Quarantined) -> None:
        if fence:
            save_fence(store_root, CatchUpFence(q.offset, q.old_end, epoch, q.path), fs=fs)

    return quarantine_tail(
        commitlog_dir,
        segment_size,
        offset,
        os.path.join(store_root, QUARANTINE_DIR),
        fs=fs,
        before_cut=write_fence,
    )
