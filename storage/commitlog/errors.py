"""The CommitLog's errors: stored damage recovery refuses to cut (`CorruptionError`), a record
that failed its check when read to be served (`RecordCorrupt`), no whole record at an offset
(`RecordNotFound`), and the appends refused while a failed write is unresolved (`WritesFenced`).
"""

from __future__ import annotations


class CorruptionError(Exception):
    """Stored data is damaged where it cannot be a torn tail; nothing was changed on disk."""


class LostRecord(CorruptionError):
    """Recovery found an invalid record at ``offset`` (above the flushed checkpoint) with a valid
    record after it in its segment: a page lost under later valid data (power cut, failed
    fsync), not a torn tail. Nothing was changed on disk; `quarantine.py` may move the tail
    aside when the broker's role allows it (actors/broker/store/lost_page.py)."""

    def __init__(self, message: str, *, segment: str, offset: int, valid_after: int) -> None:
        self.segment = segment
        self.offset = offset
        self.valid_after = valid_after
        super().__init__(message)


class RecordCorrupt(CorruptionError):
    """A record read to serve it failed its check (CRC or layout); it was not served."""

    def __init__(self, segment: str, offset: int, reason: str) -> None:
        self.segment = segment
        self.offset = offset
        self.reason = reason
        super().__init__(f"commitlog record at offset {offset} in {segment} is damaged: {reason}")


class RecordNotFound(LookupError):
    """No whole record at the requested offset."""


class WritesFenced(Exception):
    """The store takes no append now: what a failed write or fsync left from ``offset`` on
    must be resolved first (`CommitLog.rewrite_fenced`, `CommitLog.truncate_to`, or the
    store's repair); ``cause`` says what failed."""

    def __init__(self, offset: int, cause: str) -> None:
        self.offset = offset
        self.cause = cause
        super().__init__(f"writes are fenced from offset {offset}: {cause}")
