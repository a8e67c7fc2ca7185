"""The broker's epoch file: ``epochFileCheckpoint`` and its copy ``epochFileCheckpoint.bak``.

It records, per MasterEpoch this broker's CommitLog holds data of, the physical offset where that
epoch starts (RIP-44: "<Epoch, StartOffset> persisted to the EpochFile"). MasterEpoch values come
only from the controller (a classic fixed-role master, with no controller, takes last + 1 at
every start); a master appends ``<masterEpoch, its max offset>`` when it takes the role, before
it writes; a slave records each epoch the master's transfer headers announce, before the data
they label; truncation drops entries from the cut on; recovery drops entries that start beyond
the recovered log; retention drops epochs wholly below the oldest data. An epoch's end offset is
the next entry's start (the last one is open), so it is never stored.

Format (upstream CheckpointFile: entry count, then one ``epoch-startOffset`` line per entry) plus
a ``crc`` line over the rest, so a file damaged outside our write path is detected instead of
trusted. Every write replaces the main file and then the ``.bak`` copy, each by temp file + fsync
+ rename + directory fsync: a kill -9 leaves at least one whole, current-or-previous copy.
Reading takes the main file and falls back to the copy when it is missing or damaged; two
damaged copies are an error naming both files (the epoch file must never be silently reset).

Synchronous file code: callers in the event loop run `append` / `truncate_*` in a worker thread.
"""

from __future__ import annotations

import itertools
import os
import zlib
from collections.abc import Iterable, Sequence

import attrs

from rocketrio.storage.durable import makedirs_synced, read_file, write_file_atomic
from rocketrio.storage.fs import OS_FS, FileSystem

EPOCH_FILE = "epochFileCheckpoint"
BACKUP_SUFFIX = ".bak"
# upstream EpochEntry's open end (Long.MAX_VALUE)
OPEN_END_OFFSET = (1 << 63) - 1


class EpochFileError(Exception):
    """The epoch file (and its backup) cannot be trusted, or an update breaks its order."""


@attrs.frozen(slots=True)
class EpochRecord:
    epoch: int
    start_offset: int


@attrs.frozen(slots=True)
class EpochRange:
    """An entry with its end offset: the next entry's start, `OPEN_END_OFFSET` for the last."""

    epoch: int
    start_offset: int
    end_offset: int


def encode_records(records: Sequence[EpochRecord]) -> bytes:
    body = f"{len(records)}\n" + "".join(f"{r.epoch}-{r.start_offset}\n" for r in records)
    return (body + f"crc={zlib.crc32(body.encode()):08x}\n").encode()


def decode_records(data: bytes, path: str) -> list[EpochRecord]:
    """Parse a file written by `encode_records`; EpochFileError says what is wrong."""
    text = data.decode("utf-8", errors="replace")
    body, sep, crc_line = text.rpartition("crc=")
    try:
        ok = bool(sep) and int(crc_line.strip(), 16) == zlib.crc32(body.encode())
    except ValueError:
        ok = False
    if not ok:
        raise EpochFileError(f"{path}: checksum mismatch; the epoch file is damaged")
    lines = body.splitlines()
    try:
        count = int(lines[0])
        records = [_parse_line(line) for line in lines[1:]]
    except (IndexError, ValueError) as e:
        raise EpochFileError(f"{path}: malformed epoch file: {e}") from None
    if count != len(records):
        raise EpochFileError(f"{path}: expected {count} entries, found {len(records)}")
    _check_order(records, path)
    return records


def _parse_line(line: str) -> EpochRecord:
    epoch, sep, start = line.partition("-")
    if not sep:
        raise ValueError(f"entry {line!r} is not epoch-startOffset")
    return EpochRecord(int(epoch), int(start))


def _check_order(records: Sequence[EpochRecord], path: str) -> None:
    for prev, cur in itertools.pairwise(records):
        if cur.epoch <= prev.epoch or cur.start_offset < prev.start_offset:
            raise EpochFileError(
                f"{path}: entry {cur.epoch}-{cur.start_offset} does not follow "
                f"{prev.epoch}-{prev.start_offset} (epochs must grow, offsets must not shrink)"
            )


class EpochFile:
    """`<epoch, startOffset>` entries of one broker, loaded at construction."""

    def __init__(self, path: str, *, fs: FileSystem = OS_FS) -> None:
        """`path` is the main file (upstream key storePathEpochFile, default
        ``<storePathRootDir>/epochFileCheckpoint``); the copy is ``path + ".bak"``."""
        self.path = path
        self._fs = fs
        self.directory = os.path.dirname(path) or "."
        self.backup_path = path + BACKUP_SUFFIX
        self.loaded_from_backup = False
        self._records: list[EpochRecord] = self._load()

    def _read(self, path: str) -> list[EpochRecord] | None:
        try:
            data = read_file(path, fs=self._fs)
        except FileNotFoundError:
            return None
        return decode_records(data, path)

    def _load(self) -> list[EpochRecord]:
        try:
            main = self._read(self.path)
        except EpochFileError as main_error:
            try:
                backup = self._read(self.backup_path)
            except EpochFileError as backup_error:
                raise EpochFileError(f"{main_error}; {backup_error}") from None
            if backup is None:
                raise
            self.loaded_from_backup = True
            return backup
        if main is not None:
            return main
        # the main file is written first, so a lone backup is the previous state
        backup = self._read(self.backup_path)
        self.loaded_from_backup = backup is not None
        return backup or []

    def _persist(self, records: list[EpochRecord]) -> None:
        makedirs_synced(self.directory, fs=self._fs)
        data = encode_records(records)
        write_file_atomic(self.path, data, tmp_suffix=".writing", fs=self._fs)
        write_file_atomic(self.backup_path, data, tmp_suffix=".writing", fs=self._fs)
        self._records = records

    # --- reads ---------------------------------------------------------------------------------

    @property
    def records(self) -> list[EpochRecord]:
        return list(self._records)

    def last_epoch(self) -> int:
        """The newest epoch, -1 when the file is empty (upstream lastEpoch)."""
        return self._records[-1].epoch if self._records else -1

    def last_record(self) -> EpochRecord | None:
        return self._records[-1] if self._records else None

    def ranges(self) -> list[EpochRange]:
        out = []
        for i, r in enumerate(self._records):
            nxt = self._records[i + 1].start_offset if i + 1 < len(self._records) else None
            out.append(EpochRange(r.epoch, r.start_offset, OPEN_END_OFFSET if nxt is None else nxt))
        return out

    def find(self, epoch: int) -> EpochRange | None:
        return next((r for r in self.ranges() if r.epoch == epoch), None)

    # --- writes (fsync: call from a worker thread) ----------------------------------------------

    def append(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; False if it is already the last entry
        with that start (idempotent re-registration of the same master). A smaller epoch, or a
        start before the previous entry's, is an error: epochs come from the controller and
        only grow."""
        last = self.last_record()
        if last is not None:
            if last == EpochRecord(epoch, start_offset):
                return False
            if epoch <= last.epoch or start_offset < last.start_offset:
                raise EpochFileError(
                    f"{self.path}: cannot append {epoch}-{start_offset} after "
                    f"{last.epoch}-{last.start_offset}"
                )
        self._persist([*self._records, EpochRecord(epoch, start_offset)])
        return True

    def replace_all(self, records: Iterable[EpochRecord]) -> None:
        """Set the whole list (a slave adopting its master's epochs after truncation)."""
        new = list(records)
        _check_order(new, self.path)
        self._persist(new)

    def truncate_suffix(self, offset: int) -> None:
        """The CommitLog was cut at `offset`: drop epochs starting at or after it."""
        kept = [r for r in self._records if r.start_offset < offset]
        if kept != self._records:
            self._persist(kept)

    def truncate_prefix(self, offset: int) -> None:
        """CommitLog files below `offset` were deleted: drop the epochs wholly below it.

        The first remaining epoch keeps its recorded start even if that is below `offset`:
        replicas match epochs by (epoch, start), so a start must never depend on how much a
        replica's retention deleted (upstream rewrote it, and replicas with different
        retention then shared no epoch at all)."""
        kept = [
            EpochRecord(r.epoch, r.start_offset) for r in self.ranges() if r.end_offset > offset
        ]
        if kept != self._records:
            self._persist(kept)
