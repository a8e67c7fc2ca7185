"""The store actor's refusing state after the disk failed a write: which errors put it there,
what a refused put is told, and what may end it.

Pure: errors in, decisions out. The store actor (store_actor.py, whose docstring gives the rule
for each write path and role) keeps one `WriteFault` while it refuses writes and asks
`WriteFault.may_cut_log` whether the repair (storage/store_repair.py) may cut its CommitLog.

- `disk_full(exc)`: the error means the disk (or the broker's quota) is full: ENOSPC or EDQUOT
  from a write or an fsync, or the store's own `WritesFenced`, which a failed write left (a
  full disk, or an error the actor did not see itself). Any other OSError (EIO: the disk is
  broken, not full) is not: the actor keeps its fail-stop answer to those.
- `WriteFault`: why writes are refused, and whether only a restart ends it (a master whose
  CommitLog holds a record lost with its page: its slaves may hold those bytes, so only the
  restart's recovery and the failover rules may decide what to keep).
- `refusal_remark`: upstream's SERVICE_NOT_AVAILABLE remark naming the full disk, the same
  text the disk guard (disk_guard.py) answers, so clients see one behaviour.
"""

from __future__ import annotations

import errno
import os

import attrs

from rocketrio.storage.message_store import WritesFenced

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_full(exc: BaseException) -> bool:
    """The store failed because its disk is full (module docstring)."""
    if isinstance(exc, WritesFenced):
        return True
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def describe(exc: BaseException) -> str:
    """The cause as a person reads it: the failed call's error, without the exception class."""
    if isinstance(exc, WritesFenced):
        return exc.cause
    if isinstance(exc, OSError) and exc.errno is not None:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{os.strerror(exc.errno)}{where}"
    return str(exc)


def refusal_remark(detail: str) -> str:
    """Upstream SendMessageProcessor's SERVICE_NOT_AVAILABLE remark, ``detail`` in brackets."""
    return (
        "service not available now. It may be caused by one of the following reasons: "
        f"the broker's disk is full [{detail}], messages are put to the slave, message store "
        "has been shut down, etc."
    )


@attrs.frozen
class WriteFault:
    """The store refuses writes because ``cause`` (a write or fsync failed on a full disk).

    ``until_restart``: a master's CommitLog holds a record from ``offset`` that a lost page
    took with it; writes wait for a restart (module docstring)."""

    cause: str
    until_restart: bool = False
    offset: int | None = None

    @staticmethod
    def may_cut_log(role_is_master: bool) -> bool:
        """A broker without replicas or a slave may cut its CommitLog below what it wrote (the
        slave fetches it again); a master may not, its slaves may hold the bytes."""
        return not role_is_master

    def remark(self) -> str:
        if self.until_restart:
            return refusal_remark(
                f"{self.cause}; the CommitLog from offset {self.offset} may not be on disk "
                "and this master takes no writes until it restarts"
            )
        return refusal_remark(self.cause)
