"""Log replication of RaftCore (a mixin; the state lives on RaftCore): follower and leader side.

Replication is Raft's: consistency check on (prev_index, prev_term), a conflict hint for fast
back-off, per-follower probe / replicate (pipelined, bounded in-flight) / snapshot states,
commit only by a majority of durable matches on an entry of the current term (the leader
appends a no-op, data b"", on election; the shell skips empty entries when applying).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketrio.actors.observe.events import RaftLogTruncated, RaftSnapshotInstalled
from rocketrio.actors.raft.state import Progress, ProgressState, Role
from rocketrio.protocol.raft import (
    ENTRY_HEADER,
    AppendEntriesRequest,
    AppendEntriesResponse,
    Entry,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    ResponseCode,
    Snapshot,
    SnapshotMeta,
)

if TYPE_CHECKING:
    from rocketrio.actors.raft.config import RaftConfig


class ReplicationMixin:
    """RaftCore's AppendEntries / InstallSnapshot handling, both ends, and the commit rule.

    Uses RaftCore's state (annotated below) and its `_send`, `_note`, `term_at`,
    `last_index`, `_accept_leader` and `_change_to_candidate`.
    """

    self_id: str
    peers: dict[str, str]
    config: RaftConfig
    term: int
    role: Role
    commit_index: int
    _log: list[Entry]
    _snapshot: Snapshot | None
    _snap_index: int
    _snap_term: int
    _apply_handed: int
    _stable_index: int
    _unstable_from: int
    _pending_snapshot: Snapshot | None
    _progress: dict[str, Progress]

    # ---------------------------------------------------------------- replication: follower

    def _handle_append(self, req: AppendEntriesRequest, now_ms: int) -> AppendEntriesResponse:
        code = self._accept_leader(req.term, req.leader_id, now_ms)
        if code is not ResponseCode.SUCCESS:
            return AppendEntriesResponse(self.self_id, req.from_id, self.term, code, 0)
        prev_index, prev_term, entries = req.prev_index, req.prev_term, req.entries
        if prev_index < self.commit_index:
            # the committed prefix matches the leader's; skip what this message repeats
            skip = min(self.commit_index - prev_index, len(entries))
            entries = entries[skip:]
            prev_index += skip
            if prev_index < self.commit_index:
                return self._append_ok(req, self.commit_index)
            prev_term = self.term_at(prev_index)  # the commit index itself: ours is right
        if prev_index > self.last_index:
            return self._append_reject(req, prev_index, self.last_index + 1)
        here = self.term_at(prev_index)
        if here != prev_term:
            return self._append_reject(req, prev_index, self._conflict_hint(prev_index))
        self._append_entries(entries)
        last_new = prev_index + len(entries)
        if req.leader_commit > self.commit_index:
            self.commit_index = max(self.commit_index, min(req.leader_commit, last_new))
        return self._append_ok(req, last_new)

    def _append_ok(self, req: AppendEntriesRequest, index: int) -> AppendEntriesResponse:
        return AppendEntriesResponse(
            self.self_id, req.from_id, self.term, ResponseCode.SUCCESS, index
        )

    def _append_reject(
        self, req: AppendEntriesRequest, prev_index: int, hint: int
    ) -> AppendEntriesResponse:
        code = ResponseCode.INCONSISTENT_STATE
        return AppendEntriesResponse(self.self_id, req.from_id, self.term, code, prev_index, hint)

    def _conflict_hint(self, index: int) -> int:
        """First index of the term at `index` (not below commit + 1): retry from there."""
        term = self.term_at(index)
        while index - 1 > self.commit_index and self.term_at(index - 1) == term:
            index -= 1
        return index

    def _append_entries(self, entries: tuple[Entry, ...]) -> None:
        last = self.last_index
        for pos, e in enumerate(entries):
            if e.index <= last:
                if self.term_at(e.index) == e.term:
                    continue
                self._truncate_from(e.index)
            self._log.extend(entries[pos:])
            self._unstable_from = min(self._unstable_from, entries[pos].index)
            return

    def _truncate_from(self, index: int) -> None:
        if index <= self.commit_index:
            raise RuntimeError(
                f"refusing to truncate committed entry {index} <= {self.commit_index}"
            )
        dropped = self.last_index - index + 1
        del self._log[index - self._snap_index - 1 :]
        self._stable_index = min(self._stable_index, index - 1)
        self._unstable_from = min(self._unstable_from, index)
        self._note(RaftLogTruncated(term=self.term, index=index, dropped=dropped))

    def _handle_install_snapshot(
        self, req: InstallSnapshotRequest, now_ms: int
    ) -> InstallSnapshotResponse:
        code = self._accept_leader(req.term, req.leader_id, now_ms)
        if code is not ResponseCode.SUCCESS:
            return InstallSnapshotResponse(self.self_id, req.from_id, self.term, code, 0)
        index, term = req.snapshot_index, req.snapshot_term
        ok = ResponseCode.SUCCESS
        if index <= self.commit_index:
            return InstallSnapshotResponse(
                self.self_id, req.from_id, self.term, ok, self.commit_index
            )
        if self.term_at(index) == term:
            # we already hold that entry, so the log up to it matches: no need to install
            self.commit_index = index
            return InstallSnapshotResponse(self.self_id, req.from_id, self.term, ok, index)
        snap = Snapshot(SnapshotMeta(index, term), req.data)
        self._log = []
        self._snapshot, self._snap_index, self._snap_term = snap, index, term
        self.commit_index = self._apply_handed = index
        self._stable_index = index
        self._unstable_from = index + 1
        self._pending_snapshot = snap
        self._note(
            RaftSnapshotInstalled(
                term=self.term, index=index, snapshot_term=term, leader=req.leader_id
            )
        )
        return InstallSnapshotResponse(self.self_id, req.from_id, self.term, ok, index)

    # ---------------------------------------------------------------- replication: leader

    def _flush_replication(self) -> None:
        for peer, pr in self._progress.items():
            if pr.state is ProgressState.PROBE:
                if not pr.paused and (
                    pr.next_index <= self.last_index or pr.sent_commit < self.commit_index
                ):
                    self._send_append(peer, pr)
            elif pr.state is ProgressState.REPLICATE:
                sent = False
                while (
                    pr.state is ProgressState.REPLICATE
                    and pr.next_index <= self.last_index
                    and not self._inflight_full(pr)
                ):
                    self._send_append(peer, pr)
                    sent = True
                if not sent and pr.sent_commit < self.commit_index:
                    self._send_append(peer, pr)

    def _inflight_full(self, pr: Progress) -> bool:
        return (
            len(pr.inflight) >= self.config.maxInflightPushNum
            or pr.inflight_bytes >= self.config.maxBatchPushSize * self.config.maxInflightPushNum
        )

    def _batch_from(self, lo: int) -> list[Entry]:
        start = lo - self._snap_index - 1
        out: list[Entry] = []
        size = 0
        cap_bytes = self.config.maxBatchPushSize
        for e in self._log[start : start + self.config.maxBatchPushNum]:
            size += ENTRY_HEADER.size + len(e.data)
            if out and size > cap_bytes:
                break
            out.append(e)
        return out

    def _send_append(self, peer: str, pr: Progress) -> None:
        if pr.next_index <= self._snap_index:
            self._send_snapshot(peer, pr)
            return
        prev = pr.next_index - 1
        prev_term = self.term_at(prev)
        assert prev_term is not None
        batch = self._batch_from(pr.next_index)
        commit = self.commit_index
        msg = AppendEntriesRequest(
            self.self_id, peer, self.self_id, self.term, prev, prev_term, commit, tuple(batch)
        )
        self._send(peer, msg)
        pr.sent_commit = commit
        if pr.state is ProgressState.PROBE:
            pr.paused = True
        elif batch:
            nbytes = sum(len(e.data) for e in batch)
            pr.inflight.append((batch[-1].index, nbytes))
            pr.inflight_bytes += nbytes
            pr.next_index = batch[-1].index + 1

    def _send_snapshot(self, peer: str, pr: Progress) -> None:
        snap = self._snapshot
        assert snap is not None
        meta = snap.meta
        self._send(
            peer,
            InstallSnapshotRequest(
                self.self_id, peer, self.self_id, self.term, meta.index, meta.term, snap.data
            ),
        )
        pr.state = ProgressState.SNAPSHOT
        pr.inflight.clear()
        pr.inflight_bytes = 0
        pr.snapshot_checks = 0

    def _check_replication_stalls(self) -> None:
        """Once per heartbeat: resume paused probes, restart pipelines that went silent."""
        for pr in self._progress.values():
            if pr.state is ProgressState.PROBE:
                pr.paused = False
            elif pr.state is ProgressState.REPLICATE:
                if pr.inflight and not pr.acked:
                    pr.become_probe(pr.match_index + 1)
            else:
                pr.snapshot_checks += 1
                if not pr.acked and pr.snapshot_checks >= self.config.maxHeartBeatLeak:
                    pr.become_probe(pr.match_index + 1)  # assume it was lost: send again
            pr.acked = False

    def _handle_append_response(self, resp: AppendEntriesResponse) -> None:
        if self.role is not Role.LEADER:
            return
        pr = self._progress.get(resp.from_id)
        if pr is None:
            return
        if resp.code is ResponseCode.EXPIRED_TERM and resp.term > self.term:
            self._change_to_candidate(resp.term, "append_expired_term")
            return
        if resp.term != self.term:
            return
        if resp.code is ResponseCode.SUCCESS:
            pr.acked = True
            self._on_match(pr, resp.index)
        elif resp.code is ResponseCode.INCONSISTENT_STATE:
            pr.acked = True
            rejected, hint = resp.index, resp.hint_index
            # stale if the follower has since acknowledged past what it then held
            fresh = rejected > pr.match_index and hint > pr.match_index
            if pr.state is ProgressState.REPLICATE and fresh:
                pr.become_probe(min(hint, rejected))
            elif pr.state is ProgressState.PROBE and rejected == pr.next_index - 1:
                pr.become_probe(min(hint, rejected))
        elif pr.state is not ProgressState.SNAPSHOT:
            # the member does not follow us (yet); retry after the next heartbeat
            pr.become_probe(pr.match_index + 1)
            pr.paused = True

    def _on_match(self, pr: Progress, index: int) -> None:
        advanced = index > pr.match_index
        if advanced:
            pr.match_index = index
        if pr.next_index <= pr.match_index:
            pr.next_index = pr.match_index + 1
        while pr.inflight and pr.inflight[0][0] <= index:
            pr.inflight_bytes -= pr.inflight.popleft()[1]
        # a late answer to an old message must not restart the pipeline (that re-sends the
        # window, whose answers restart it again: a message storm under loss and reordering)
        if pr.state is ProgressState.PROBE and (advanced or index >= self.last_index):
            pr.state = ProgressState.REPLICATE
            pr.paused = False
        if advanced:
            self._maybe_commit()

    def _handle_snapshot_response(self, resp: InstallSnapshotResponse) -> None:
        if self.role is not Role.LEADER:
            return
        pr = self._progress.get(resp.from_id)
        if pr is None:
            return
        if resp.code is ResponseCode.EXPIRED_TERM and resp.term > self.term:
            self._change_to_candidate(resp.term, "snapshot_expired_term")
            return
        if resp.term != self.term or pr.state is not ProgressState.SNAPSHOT:
            return
        pr.acked = True
        if resp.code is ResponseCode.SUCCESS:
            pr.match_index = max(pr.match_index, resp.index)
            pr.become_probe(pr.match_index + 1)
            self._maybe_commit()
        else:
            pr.become_probe(pr.match_index + 1)
            pr.paused = True

    def _maybe_commit(self) -> None:
        """Commit the highest index durable on a majority, if it is of the current term."""
        matches = [pr.match_index for pr in self._progress.values()]
        matches.append(self._stable_index)  # the leader counts only what it has fsynced
        matches.sort(reverse=True)
        candidate = matches[len(self.peers) // 2]
        if candidate > self.commit_index and self.term_at(candidate) == self.term:
            self.commit_index = candidate
