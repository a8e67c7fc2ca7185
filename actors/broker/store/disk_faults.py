"""The store actor's refusing state after the disk failed a write: which errors put it there,
what a refused put is told, and what may end it.

The store actor (actor.py) keeps one `FaultState`; while it holds a `WriteFault` the actor
refuses writes, and `WriteFault.may_cut_log` says whether the repair (storage/store_repair.py)
may cut its CommitLog.

A full disk (ENOSPC or EDQUOT from a write or an fsync, or the store's
`WritesFenced`) is a clean refusal, never a crash nor an acknowledgement of data that is not
durable. The actor enters its refusing state (`fault`), tells the broker (``on_write_fault``:
the disk guard then refuses sends before they reach the store and logs disk_full), and answers
every put SERVICE_NOT_AVAILABLE with upstream's "the broker's disk is full [..]" remark until a
probe succeeds. Per write path (the storage rules are store_repair.py's and commitlog.py's):
- a put whose CommitLog or ConsumeQueue/index write fails was cut back whole by the store:
  refused, nothing of it stored; the turn's later puts are refused without a write;
- SYNC_FLUSH fsync fails: the turn's puts are refused (not acknowledged: their durability is
  unknown). The store fenced its CommitLog from the last durable offset, since Linux may
  have dropped the pages it could not write and report the next fsync as a success;
- the periodic flush fails (ASYNC_FLUSH acknowledged without fsync, as always): nothing is
  answered differently; the CommitLog is fenced the same way, the ConsumeQueues and index are
  dispatched again from the dispatch checkpoint;
- a slave's replicated append or its fsync fails: the HA client's append fails (OSError), so
  it reconnects and fetches again from where the log ends;
- a dispatch up to confirmOffset fails: the records stay and are dispatched by the repair.
Every cleanResourceInterval (``probe_interval_ms``) the actor probes, between turns: the store
repairs (the fenced CommitLog range is checked record by record, written again and fsynced, so
nothing acknowledged is lost, not even ASYNC_FLUSH data; a record that fails its check because
its page was lost is cut on a STANDALONE broker or a SLAVE, which loses exactly what a crash
would have lost, and keeps a MASTER refusing writes until it restarts, because its slaves may
hold those bytes and cutting them under one epoch would make the replicas diverge; the restart
recovers the log as after a power cut: when valid records follow the lost one in its segment
(the usual case) a classic master's start-up refuses with a CorruptionError naming its offset,
for an operator to re-sync that store from a replica, while in controller mode or on a classic
slave the tail is quarantined and the broker catches up from a master (lost_page.py); else the
lost record is cut as a torn tail), then writes a
scratch block; writes go in again once both work (and the disk guard's usage ratio allows).
Any other fsync error (EIO: a broken disk, not a full one) still answers UNKNOWN_ERROR and
crashes the actor, so the process restarts and recovers.

- `disk_full(exc)`: the error means the disk (or the broker's quota) is full: ENOSPC or EDQUOT
  from a write or an fsync, or the store's own `WritesFenced`, which a failed write left (a
  full disk, or an error the actor did not see itself). Any other OSError (EIO: the disk is
  broken, not full) is not: the actor keeps its fail-stop answer to those.
- `WriteFault`: why writes are refused, and whether only a restart ends it (a master whose
  CommitLog holds a record lost with its page: its slaves may hold those bytes, so only the
  restart's recovery and the failover rules may decide what to keep; in controller mode the
  restart moves the tail aside and the broker catches up from a new master, lost_page.py).
- `refusal_remark`: upstream's SERVICE_NOT_AVAILABLE remark naming the full disk, the same
  text the disk guard (disk_guard.py) answers, so clients see one behaviour.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

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


# on_write_fault(cause): the store refuses writes because of cause; None: it takes them again
WriteFaultListener = Callable[[str | None], None]


class FaultState:
    """The actor's refusing state and who hears when it starts or ends."""

    def __init__(self, listener: WriteFaultListener | None) -> None:
        self.fault: WriteFault | None = None
        self.listener = listener

    def enter(self, exc: BaseException) -> WriteFault:
        """Refuse writes from now on (the first cause is the one reported)."""
        if self.fault is not None:
            return self.fault
        fault = self.fault = WriteFault(describe(exc))
        if self.listener is not None:
            self.listener(fault.cause)
        return fault

    def fence_until_restart(self, offset: int) -> WriteFault:
        """The repair kept a master's record lost with its page: only a restart ends this."""
        assert self.fault is not None
        self.fault = WriteFault(self.fault.cause, until_restart=True, offset=offset)
        return self.fault

    def end(self) -> None:
        """The probe wrote again: writes go in."""
        self.fault = None
        if self.listener is not None:
            self.listener(None)
