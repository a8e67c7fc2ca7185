"""Replication status for operators (GET_BROKER_HA_STATUS, 907): a pure core.

The shells hand in a snapshot of the live HA state — `MasterView` (the CommitLog end, the
SyncStateSet the controller confirmed, one `SlaveLink` per connected slave) or `SlaveView`
(the HA client's connection to its master) — and `runtime_info` builds upstream's
`HARuntimeInfo` from it, as upstream's AutoSwitchHAService#getRuntimeInfo does:

- master: ``diff = masterCommitLogMaxOffset - slaveAckOffset`` per slave; ``inSync`` is
  membership of the SyncStateSet (not a guess from the diff); ``inSyncSlaveNums`` counts the
  set's members other than the master, connected or not (a member whose connection just
  dropped is still in the set until the controller accepts the shrink);
- slave: the master's HA address, its own CommitLog end, when it last read from / wrote to
  the master (epoch ms; 0 = never, and the read time is 0 while disconnected, as upstream
  resets it on close), and ``masterFlushOffset``: the confirmOffset the master last announced
  (the offset up to which the master's data is committed; upstream filled this from a one-off
  exchange at start-up).

Times come in on Trio's clock (what the HA shells keep); they are turned into wall-clock
epoch ms here from the two "now"s the caller gives.

`ByteRate` is upstream's FlowMonitor without a thread: bytes counted per whole second of the
Trio clock; the rate is the count of the last complete second.
"""

from __future__ import annotations

from typing import assert_never

import attrs

from rocketrio.protocol.ha_bodies import HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo

WINDOW_MS = 1000


class ByteRate:
    """Bytes per second over whole one-second windows (upstream FlowMonitor)."""

    def __init__(self, window_ms: int = WINDOW_MS) -> None:
        self.window_ms = window_ms
        self._window: int | None = None  # index of the window being counted
        self._count = 0
        self._last = 0  # the count of the window just before it

    def _roll(self, now_ms: int) -> None:
        w = now_ms // self.window_ms
        if self._window is None:
            self._window = w
        elif w > self._window:
            # the previous window's count is the rate only if it is the one just before now
            self._last = self._count if w == self._window + 1 else 0
            self._count = 0
            self._window = w

    def add(self, n: int, now_ms: int) -> None:
        self._roll(now_ms)
        self._count += n

    def per_second(self, now_ms: int) -> int:
        """Bytes counted in the last complete window (0 when it saw nothing)."""
        self._roll(now_ms)
        return self._last * WINDOW_MS // self.window_ms


@attrs.frozen(slots=True)
class SlaveLink:
    """One slave connection on the master."""

    addr: str
    slave_id: int | None  # None until its handshake
    ack_offset: int  # -1 until its first ack
    transfer_from: int  # the next offset to send; -1 until the first ack fixed it
    bytes_per_s: int


@attrs.frozen(slots=True)
class MasterView:
    max_offset: int
    self_id: int
    sync_state_set: frozenset[int]  # confirmed by the controller (classic: applied locally)
    links: tuple[SlaveLink, ...] = ()


@attrs.frozen(slots=True)
class SlaveView:
    master_ha_addr: str | None  # None: master unknown or its HA address not resolved yet
    max_offset: int
    connected: bool
    last_read_ms: int | None  # Trio-clock ms; None: never
    last_write_ms: int | None
    bytes_per_s: int
    master_confirm_offset: int  # -1: nothing heard from a master yet


HaView = MasterView | SlaveView


def _wall(mono_ms: int | None, mono_now_ms: int, wall_now_ms: int) -> int:
    if mono_ms is None:
        return 0
    return wall_now_ms - (mono_now_ms - mono_ms)


def runtime_info(view: HaView, *, mono_now_ms: int, wall_now_ms: int) -> HARuntimeInfo:
    """The HARuntimeInfo body of ``view`` (see module docstring)."""
    match view:
        case MasterView():
            members = view.sync_state_set - {view.self_id}
            conns = [
                HAConnectionRuntimeInfo(
                    addr=link.addr,
                    slaveAckOffset=link.ack_offset,
                    diff=view.max_offset - link.ack_offset,
                    inSync=link.slave_id is not None and link.slave_id in members,
                    transferredByteInSecond=link.bytes_per_s,
                    transferFromWhere=link.transfer_from,
                )
                for link in view.links
            ]
            return HARuntimeInfo(
                master=True,
                masterCommitLogMaxOffset=view.max_offset,
                inSyncSlaveNums=len(members),
                haConnectionInfo=conns,
            )
        case SlaveView():
            client = HAClientRuntimeInfo(
                masterAddr=view.master_ha_addr,
                transferredByteInSecond=view.bytes_per_s,
                maxOffset=view.max_offset,
                lastReadTimestamp=(
                    _wall(view.last_read_ms, mono_now_ms, wall_now_ms) if view.connected else 0
                ),
                lastWriteTimestamp=_wall(view.last_write_ms, mono_now_ms, wall_now_ms),
                masterFlushOffset=max(0, view.master_confirm_offset),
            )
            return HARuntimeInfo(master=False, haClientRuntimeInfo=client)
        case _:
            assert_never(view)
