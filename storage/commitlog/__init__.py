"""The CommitLog (M1): the append-only message log, in one module per part it owns.

- log.py: `CommitLog`, the log itself: its offsets and flushed checkpoint, append, flush,
  read, truncate, retention; it composes the parts below.
- segments.py: `SegmentFiles`, the segment files (``<store>/commitlog/<20-digit base>``) and
  every file call on them; `segment_name`, `list_segments`.
- recovery.py: `recover`, the record scan on open that cuts a torn tail and refuses damage in
  the middle; `CommitLogRecovery`, its report.
- fence.py: `WriteFence`, what a failed write or fsync leaves, and the rewrite that resolves it.
- read_check.py: `ReadCheck`, which records a read must check before they are served.
- records.py: walking whole records, and the check of replicated bytes.
- checkpoint.py: `OffsetCheckpoint`, one offset in a small CRC-checked file.
- quarantine.py: `quarantine_tail`, moving a lost record's tail aside (a replica's recovery).
- errors.py: `CorruptionError`, `LostRecord`, `RecordCorrupt`, `RecordNotFound`, `WritesFenced`.
"""

from rocketrio.storage.commitlog.checkpoint import CheckpointState, OffsetCheckpoint
from rocketrio.storage.commitlog.errors import (
    CorruptionError,
    LostRecord,
    RecordCorrupt,
    RecordNotFound,
    WritesFenced,
)
from rocketrio.storage.commitlog.fence import WriteFence
from rocketrio.storage.commitlog.log import CHECKPOINT_FILE, CommitLog
from rocketrio.storage.commitlog.records import RecordFields
from rocketrio.storage.commitlog.recovery import CommitLogRecovery
from rocketrio.storage.commitlog.segments import list_segments, segment_name
from rocketrio.storage.durable import pwrite_all

__all__ = [
    "CHECKPOINT_FILE",
    "CheckpointState",
    "CommitLog",
    "CommitLogRecovery",
    "CorruptionError",
    "LostRecord",
    "OffsetCheckpoint",
    "RecordCorrupt",
    "RecordFields",
    "RecordNotFound",
    "WriteFence",
    "WritesFenced",
    "list_segments",
    "pwrite_all",
    "segment_name",
]
