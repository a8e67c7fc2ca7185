"""Offline, read-only verification of a whole broker store (``rocketrio admin checkStore``).

`check_store` opens every file read-only and changes nothing, so it is safe beside a running
broker (what that broker is writing at the moment may show as a torn tail: a warning). It
checks, and reports each finding with its file and offset:

- the CommitLog: segment names (20-digit offsets, aligned, no gap), then every record of every
  segment with the recovery scan (record_scan.py: layout, physical offset, record CRC). A bad
  record below the flushed checkpoint, or with a valid record after it, or that would make
  recovery drop later segments, is a problem; a torn tail of the last segment (what a crash or
  a write in progress leaves, and recovery cuts) is a warning;
- the checkpoints ``commitlog/flushed.checkpoint``, ``dispatch.checkpoint`` and
  ``confirm.checkpoint``: a file that fails its CRC is a problem (recovery falls back to a full
  scan, but the disk damaged it); a flushed offset beyond the CommitLog's valid end is a problem
  (fsynced data is missing);
- every ConsumeQueue file: names, then every 20-byte entry: it must point at the start of a
  whole record of its topic and queue, of the entry's size, whose queueOffset is the entry's
  number. Entries below the CommitLog's first segment (retention) are skipped; entries at or
  beyond the CommitLog end are a warning above the dispatch checkpoint (a crash leaves them and
  recovery cuts them) and a problem below it. Zero entries before the first entry are a queue
  starting above 0; after the last one, an unflushed tail (warning); between two entries, a
  problem;
- the epoch file (``epochFileCheckpoint`` and its ``.bak``) when present: each copy must decode
  (count, CRC, order); an epoch starting beyond the CommitLog end is a warning.

The index files are derived data that recovery rebuilds; they are not checked.
"""

from __future__ import annotations

import itertools
import os

import attrs

from rocketrio.protocol.message import MessageDecodeError, check_stored_record, dispatch_fields
from rocketrio.storage.commitlog import (
    CHECKPOINT_FILE,
    OffsetCheckpoint,
    list_segments,
    segment_name,
)
from rocketrio.storage.consume_queue import CQ_STORE_UNIT_SIZE, ENTRY
from rocketrio.storage.dispatch_gate import CONFIRM_CHECKPOINT
from rocketrio.storage.durable import read_file
from rocketrio.storage.epoch_file import BACKUP_SUFFIX, EpochFileError, decode_records
from rocketrio.storage.fs import OS_FS, FileSystem, ReadMap
from rocketrio.storage.record_scan import find_valid_record, mapped, scan_segment

DEFAULT_SEGMENT_SIZE = 1024 * 1024 * 1024  # upstream mappedFileSizeCommitLog
DEFAULT_CQ_FILE_SIZE = 300_000 * CQ_STORE_UNIT_SIZE  # upstream mappedFileSizeConsumeQueue
EPOCH_FILE = "epochFileCheckpoint"


@attrs.frozen
class Finding:
    """One problem (``severe``) or warning: the file, the offset in it (None: the whole file)
    and what is wrong."""

    file: str
    offset: int | None
    what: str
    severe: bool = True

    def line(self) -> str:
        kind = "PROBLEM" if self.severe else "WARNING"
        at = "" if self.offset is None else f" @ {self.offset}"
        return f"{kind} {self.file}{at}: {self.what}"


@attrs.define
class CheckReport:
    """What `check_store` looked at and found."""

    store: str
    segment_size: int
    segments: int = 0
    records: int = 0
    bytes_checked: int = 0
    commitlog_min: int = 0
    commitlog_end: int = 0  # the end of the last segment's valid records
    queues: int = 0
    cq_entries: int = 0
    checkpoints: dict[str, str] = attrs.Factory(dict)  # file -> ok / missing / corrupt
    epochs: int | None = None  # entries of the epoch file; None: no epoch file
    findings: list[Finding] = attrs.Factory(list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.severe]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if not f.severe]

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, file: str, offset: int | None, what: str, *, severe: bool = True) -> None:
        self.findings.append(Finding(file, offset, what, severe))


@attrs.frozen
class _Segment:
    base: int
    fd: int
    valid_end: int  # CommitLog offset where this segment's valid records end
    damaged: tuple[tuple[int, int], ...] = ()  # [start, end) CommitLog ranges of bad bytes

    def damage_at(self, start: int, end: int) -> bool:
        return any(a < end and start < b for a, b in self.damaged)


def check_store(
    store_path: str,
    *,
    segment_size: int | None = None,
    cq_file_size: int | None = None,
    epoch_file: str | None = None,
    fs: FileSystem = OS_FS,
) -> CheckReport:
    """Verify the store at ``store_path`` (see module docstring); read-only.

    ``segment_size`` / ``cq_file_size``: mappedFileSizeCommitLog / mappedFileSizeConsumeQueue;
    None infers them from the file names (two files or more), else upstream's defaults.
    ``epoch_file``: storePathEpochFile (default ``<store>/epochFileCheckpoint``).
    """
    clog_dir = os.path.join(store_path, "commitlog")
    bases = list_segments(clog_dir, fs)
    size = segment_size or _infer_size(bases, DEFAULT_SEGMENT_SIZE)
    report = CheckReport(store_path, size)
    if not fs.isdir(store_path):
        report.add(store_path, None, "no such store directory")
        return report
    flushed = _checkpoint(report, os.path.join(clog_dir, CHECKPOINT_FILE), fs)
    dispatched = _checkpoint(report, os.path.join(store_path, "dispatch.checkpoint"), fs)
    _checkpoint(report, os.path.join(store_path, CONFIRM_CHECKPOINT), fs)
    segments: list[_Segment] = []
    try:
        _check_commitlog(report, clog_dir, bases, flushed, segments, fs)
        if flushed is not None and flushed > report.commitlog_end:
            report.add(
                os.path.join(clog_dir, CHECKPOINT_FILE),
                None,
                f"flushed offset {flushed} is beyond the end of the valid CommitLog records "
                f"({report.commitlog_end}): fsynced data is missing or damaged",
            )
        _check_consume_queues(report, store_path, cq_file_size, segments, dispatched, fs)
    finally:
        for seg in segments:
            fs.close(seg.fd)
    _check_epoch_file(report, epoch_file or os.path.join(store_path, EPOCH_FILE), fs)
    return report


def _infer_size(numbers: list[int], default: int) -> int:
    return numbers[1] - numbers[0] if len(numbers) >= 2 else default


def _checkpoint(report: CheckReport, path: str, fs: FileSystem) -> int | None:
    offset, state = OffsetCheckpoint(path, fs=fs).load_state()
    report.checkpoints[path] = state
    if state == "corrupt":
        report.add(path, None, "checkpoint fails its CRC (or has the wrong size): disk damage")
    return offset


def _check_commitlog(
    report: CheckReport,
    clog_dir: str,
    bases: list[int],
    flushed: int | None,
    out: list[_Segment],
    fs: FileSystem,
) -> None:
    size = report.segment_size
    for prev, nxt in itertools.pairwise(bases):
        if nxt != prev + size:
            report.add(
                os.path.join(clog_dir, segment_name(nxt)),
                None,
                f"does not follow {segment_name(prev)} (segment size {size}): a segment is missing",
            )
    for base in bases:
        if base % size:
            report.add(os.path.join(clog_dir, segment_name(base)), None, "not segment-aligned")
    report.segments = len(bases)
    report.commitlog_min = bases[0] if bases else 0
    for base in bases:
        path = os.path.join(clog_dir, segment_name(base))
        fd = fs.open(path, os.O_RDONLY)
        is_last = base == bases[-1]
        with mapped(fs, fd) as data:
            report.bytes_checked += len(data)
            pos = 0
            damaged: list[tuple[int, int]] = []
            while True:  # past a bad record, go on from the next valid one: report them all
                scan = scan_segment(data, base, size, start=pos)
                report.records += scan.records
                if scan.ok:
                    end = base + (size if scan.blank else scan.end)
                    if not scan.blank and not is_last:
                        _classify(report, path, base, scan.end,
                                  "segment ends without an end-of-file record", data, flushed,
                                  is_last)  # fmt: skip
                    break
                _classify(report, path, base, scan.end, scan.reason or "", data, flushed, is_last)
                after = find_valid_record(data, base, size, scan.end + 1)
                if after is None:
                    end = base + scan.end
                    break
                damaged.append((base + scan.end, after))
                pos = after - base
            out.append(_Segment(base, fd, end, tuple(damaged)))
            report.commitlog_end = end


def _classify(
    report: CheckReport,
    path: str,
    base: int,
    pos: int,
    reason: str,
    data: ReadMap,
    flushed: int | None,
    is_last: bool,
) -> None:
    offset = base + pos
    if flushed is not None and offset < flushed:
        report.add(
            path,
            pos,
            f"{reason} (commitlog offset {offset}, below the flushed "
            f"checkpoint {flushed}: fsynced data changed)",
        )
        return
    after = find_valid_record(data, base, report.segment_size, pos + 1)
    if after is not None:
        report.add(
            path,
            pos,
            f"{reason} (commitlog offset {offset}); a valid record follows at "
            f"offset {after}: damage in the middle",
        )
        return
    if not is_last:
        report.add(
            path,
            pos,
            f"{reason} (commitlog offset {offset}); recovery would cut here "
            "and delete every later segment",
        )
        return
    report.add(
        path,
        pos,
        f"torn tail: {reason} (commitlog offset {offset}); recovery cuts it "
        "(a crash, or a write in progress on a running broker)",
        severe=False,
    )


def _check_consume_queues(
    report: CheckReport,
    store_path: str,
    cq_file_size: int | None,
    segments: list[_Segment],
    dispatched: int | None,
    fs: FileSystem,
) -> None:
    root = os.path.join(store_path, "consumequeue")
    if not fs.isdir(root):
        return
    by_base = {s.base: s for s in segments}
    for topic in sorted(fs.listdir(root)):
        tdir = os.path.join(root, topic)
        if not fs.isdir(tdir):
            continue
        for qname in sorted(fs.listdir(tdir)):
            qdir = os.path.join(tdir, qname)
            if not qname.isdigit() or not fs.isdir(qdir):
                report.add(qdir, None, "not a queue directory (queue ids are numbers)")
                continue
            report.queues += 1
            queue = _Queue(report, topic, int(qname), by_base, dispatched, fs)
            queue.check(qdir, cq_file_size)


@attrs.define
class _Queue:
    """The entry checks of one ConsumeQueue."""

    report: CheckReport
    topic: str
    queue_id: int
    segments: dict[int, _Segment]
    dispatched: int | None
    fs: FileSystem
    zeros_from: tuple[str, int] | None = None  # first zero entry after a valid one
    seen_valid: bool = False

    def check(self, qdir: str, cq_file_size: int | None) -> None:
        numbers = list_segments(qdir, self.fs)
        file_size = cq_file_size or _infer_size(numbers, DEFAULT_CQ_FILE_SIZE)
        for prev, nxt in itertools.pairwise(numbers):
            if nxt != prev + file_size:
                self.report.add(
                    os.path.join(qdir, segment_name(nxt)),
                    None,
                    f"does not follow {segment_name(prev)}: a file is missing",
                )
        for number in numbers:
            path = os.path.join(qdir, segment_name(number))
            raw = read_file(path, fs=self.fs)
            whole = len(raw) - len(raw) % CQ_STORE_UNIT_SIZE
            for i, (phy, size, _tags) in enumerate(ENTRY.iter_unpack(raw[:whole])):
                self._entry(path, i * CQ_STORE_UNIT_SIZE, (number + i * 20) // 20, phy, size)
            if whole != len(raw):
                self.report.add(
                    path,
                    whole,
                    "partial entry at the end (torn write; recovery cuts it)",
                    severe=False,
                )
        if self.zeros_from is not None:
            path, pos = self.zeros_from
            self.report.add(
                path,
                pos,
                "zero entries at the end (never flushed; recovery cuts them)",
                severe=False,
            )

    def _entry(self, path: str, pos: int, queue_offset: int, phy: int, size: int) -> None:
        if size == 0:
            if self.seen_valid and self.zeros_from is None:
                self.zeros_from = (path, pos)
            return
        if self.zeros_from is not None:
            zpath, zpos = self.zeros_from
            self.report.add(zpath, zpos, "zero entries between valid entries")
            self.zeros_from = None
        self.seen_valid = True
        self.report.cq_entries += 1
        problem = self._record_problem(phy, size, queue_offset)
        if problem is None:
            return
        text, severe = problem
        self.report.add(
            path, pos, f"entry {queue_offset} -> commitlog {phy}+{size}: {text}", severe=severe
        )

    def _record_problem(self, phy: int, size: int, queue_offset: int) -> tuple[str, bool] | None:
        rep = self.report
        if phy < rep.commitlog_min:
            return None  # retention deleted the segment: the queue's head is being removed
        if size < 0 or phy + size > rep.commitlog_end:
            below = self.dispatched is not None and phy + size <= self.dispatched
            why = "beyond the end of the valid CommitLog records"
            if below:
                return f"{why}, below the dispatch checkpoint {self.dispatched}", True
            return f"{why} (a crash leaves such entries; recovery cuts them)", False
        seg = self.segments.get(phy - phy % rep.segment_size)
        if seg is None or phy + size > seg.valid_end or seg.damage_at(phy, phy + size):
            return "points at damaged data, not a valid record", True
        record = self.fs.pread(seg.fd, size, phy - seg.base)
        try:
            total = check_stored_record(record, 0, expected_offset=phy, verify_crc=False)
            topic, queue_id, stored_qo, *_ = dispatch_fields(record)
        except MessageDecodeError as e:
            return f"not the start of a record ({e})", True
        if total != size:
            return f"the record there is {total} bytes", True
        if (topic, queue_id) != (self.topic, self.queue_id):
            return f"the record there belongs to {topic}:{queue_id}", True
        if stored_qo != queue_offset:
            return f"the record there has queueOffset {stored_qo}", True
        return None


def _check_epoch_file(report: CheckReport, path: str, fs: FileSystem) -> None:
    for p in (path, path + BACKUP_SUFFIX):
        try:
            raw = read_file(p, fs=fs)
        except FileNotFoundError:
            continue
        try:
            records = decode_records(raw, p)
        except EpochFileError as e:
            report.add(p, None, str(e))
            continue
        if p == path:
            report.epochs = len(records)
        for r in records:
            if r.start_offset > report.commitlog_end:
                report.add(
                    p,
                    None,
                    f"epoch {r.epoch} starts at {r.start_offset}, beyond the "
                    f"CommitLog end {report.commitlog_end} (recovery drops it)",
                    severe=False,
                )
