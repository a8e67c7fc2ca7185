"""Where a slave's CommitLog stops agreeing with its master's: the truncation algorithm (H2, H3).

Pure: epoch lists and offsets in, a `TruncationPlan` out. Run by the slave on the master's
handshake (`MasterHandshake`: the master's epochs and max offset).

The algorithm of RIP-44 (English text, descending walk): give every epoch an end (the next
entry's start; the last entry ends at that side's max offset), walk the LOCAL epochs from the
newest down, and at the first epoch the master also has WITH THE SAME START OFFSET, the logs
agree up to ``min(local end, master end)``: that is the cut. Same (epoch, start) means the same
bytes because one controller-assigned epoch has exactly one master, and every broker cuts its
log to a whole record before it starts writing as master.

Departures from upstream, each closing a hazard of reference/autoswitch-ha-facts.md §4:
- an entry that starts beyond the local log end (a crash between cutting the log and the epoch
  file) is ignored instead of getting an open end;
- local data with NO epoch records (deleted or copied epoch file) is not trusted blindly: it is
  discarded and re-fetched;
- no common epoch, or a common range that ends below our own oldest data, means the slave cannot
  prove any shared prefix: it discards its data and re-syncs from whatever the master still has
  (a slave's copy is never the only copy of an acknowledged message: the master was elected
  from the SyncStateSet), instead of failing the handshake forever;
- epoch starts are compared as recorded: retention never rewrites an epoch's start (see
  storage/epoch_file.py), so two replicas with different retention still match.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from rocketrio.storage.epoch_file import EpochRecord


@attrs.frozen(slots=True)
class TruncateTo:
    """Keep local data below ``offset`` (== local max: nothing to cut), continue from it."""

    offset: int
    matched_epoch: int | None  # the newest epoch both logs share (None: the local log is empty)


@attrs.frozen(slots=True)
class DiscardAll:
    """No provable common prefix: drop every local record and epoch, continue from empty."""

    reason: str


TruncationPlan = TruncateTo | DiscardAll


def epoch_ends(records: Sequence[EpochRecord], max_offset: int) -> list[tuple[int, int, int]]:
    """(epoch, start, end) per record: end = next start; the last ends at ``max_offset``
    (or at its own start when the log ends before it)."""
    out = []
    for i, r in enumerate(records):
        end = (
            records[i + 1].start_offset if i + 1 < len(records) else max(max_offset, r.start_offset)
        )
        out.append((r.epoch, r.start_offset, end))
    return out


def find_consistent_point(
    local: Sequence[EpochRecord],
    local_max: int,
    master: Sequence[EpochRecord],
    master_max: int,
) -> tuple[int, int] | None:
    """(cut offset, shared epoch) by the RIP-44 walk, or None when no epoch matches."""
    valid = [r for r in local if r.start_offset <= local_max]
    master_by_epoch = {e: (s, end) for e, s, end in epoch_ends(master, master_max)}
    for epoch, start, end in reversed(epoch_ends(valid, local_max)):
        theirs = master_by_epoch.get(epoch)
        if theirs is not None and theirs[0] == start:
            return min(end, theirs[1]), epoch
    return None


def plan_truncation(
    local: Sequence[EpochRecord],
    local_min: int,
    local_max: int,
    master: Sequence[EpochRecord],
    master_max: int,
) -> TruncationPlan:
    """What the slave does with its log after the master's handshake (see module docstring)."""
    if local_max <= local_min:
        return TruncateTo(local_max, None)
    if not local:
        return DiscardAll(
            f"the local CommitLog holds [{local_min}, {local_max}) but the epoch file is empty: "
            "that data cannot be matched with the master's"
        )
    found = find_consistent_point(local, local_max, master, master_max)
    if found is None:
        theirs = ", ".join(f"{r.epoch}-{r.start_offset}" for r in master) or "none"
        ours = ", ".join(f"{r.epoch}-{r.start_offset}" for r in local)
        return DiscardAll(
            f"no epoch in common with the master (ours: {ours}; master's: {theirs}): the master "
            "no longer holds the history we share, or the logs diverged"
        )
    cut, epoch = found
    if cut < local_min:
        return DiscardAll(
            f"the logs agree only up to offset {cut} (epoch {epoch}), below our oldest data at "
            f"{local_min}"
        )
    return TruncateTo(cut, epoch)
