"""RaftConfig: the controller's Raft settings, named like DLedger's `DLedgerConfig` keys.

Timing defaults differ from DLedger on purpose. DLedger ships heartBeatTimeIntervalMs=2000,
maxHeartBeatLeak=3, minVoteIntervalMs=300, maxVoteIntervalMs=1000 and waits 2000 ms (+random)
for vote answers, so a dead leader is noticed after ~6 s and replaced after ~7-9 s. The
controller must hand a broker set a new master well within its own timeouts, so we aim for
leader failover <= 1.5 s on a LAN: a leader is declared lost after maxHeartBeatLeak *
heartBeatTimeIntervalMs = 600 ms, a vote round waits at most voteRequestTimeoutMs = 200 ms, and
the randomized back-off between rounds is 150-400 ms (round-trip times on a LAN are < 1 ms,
fsync of the term file is a few ms, so these leave a wide margin).

`peers` uses the controllerDLegerPeers syntax `n0-127.0.0.1:9877;n1-127.0.0.1:9878`.
`from_controller_keys` builds a config from the controller's own key names; the class also
works with `rocketrio.protocol.config.build_config` (errors are ValueErrors naming the key).
"""

from __future__ import annotations

import attrs

from rocketrio.protocol.config import positive


class RaftConfigError(ValueError):
    """A Raft setting that cannot work; the message names the key."""


def parse_peers(peers: str, key: str = "controllerDLegerPeers") -> dict[str, str]:
    """`n0-host:port;n1-host:port` -> {"n0": "host:port", ...}, in the given order."""
    out: dict[str, str] = {}
    for item in peers.split(";"):
        item = item.strip()
        if not item:
            continue
        node_id, sep, addr = item.partition("-")
        if not sep or not node_id or not addr:
            raise RaftConfigError(f"{key}: {item!r} is not of the form <id>-<host>:<port>")
        host, colon, port = addr.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise RaftConfigError(f"{key}: address {addr!r} of {node_id!r} is not <host>:<port>")
        if node_id in out:
            raise RaftConfigError(f"{key}: peer id {node_id!r} appears twice")
        out[node_id] = addr
    if not out:
        raise RaftConfigError(f"{key}: no peers in {peers!r}")
    return out


@attrs.frozen(slots=True)
class RaftConfig:
    """Raft settings. Attribute names are the upstream key names (camelCase on purpose)."""

    group: str
    selfId: str
    peers: str
    heartBeatTimeIntervalMs: int = attrs.field(default=200, validator=positive)
    maxHeartBeatLeak: int = attrs.field(default=3, validator=positive)
    minVoteIntervalMs: int = attrs.field(default=150, validator=positive)
    maxVoteIntervalMs: int = attrs.field(default=400, validator=positive)
    # ours: DLedger hard-codes 2000 ms (+ random up to maxVoteIntervalMs) for this wait
    voteRequestTimeoutMs: int = attrs.field(default=200, validator=positive)
    # DLedger's default; the shell snapshots once this many entries were applied since the last
    snapshotThreshold: int = attrs.field(default=1000, validator=positive)
    # DLedger's default: proposals refused (LeaderPendingFull) beyond this many uncommitted
    maxPendingRequestsNum: int = attrs.field(default=10000, validator=positive)
    # ours: caps on one AppendEntries message and on unacknowledged messages per follower
    maxBatchPushNum: int = attrs.field(default=1024, validator=positive)
    maxBatchPushSize: int = attrs.field(default=1024 * 1024, validator=positive)
    maxInflightPushNum: int = attrs.field(default=64, validator=positive)

    def __attrs_post_init__(self) -> None:
        if not self.group:
            raise RaftConfigError("controllerDLegerGroup must not be empty")
        peer_map = parse_peers(self.peers)
        if self.selfId not in peer_map:
            raise RaftConfigError(
                f"controllerDLegerSelfId {self.selfId!r} is not among the peers {list(peer_map)}"
            )
        if self.minVoteIntervalMs >= self.maxVoteIntervalMs:
            raise RaftConfigError(
                f"minVoteIntervalMs ({self.minVoteIntervalMs}) must be below "
                f"maxVoteIntervalMs ({self.maxVoteIntervalMs})"
            )

    def peer_map(self) -> dict[str, str]:
        """Peer id -> address, self included."""
        return parse_peers(self.peers)

    @property
    def leader_lost_after_ms(self) -> int:
        """A follower turns candidate after this long without a leader heartbeat."""
        return self.maxHeartBeatLeak * self.heartBeatTimeIntervalMs

    @classmethod
    def from_controller_keys(
        cls,
        controllerDLegerGroup: str,
        controllerDLegerPeers: str,
        controllerDLegerSelfId: str,
        **overrides: int,
    ) -> RaftConfig:
        """Build from the controller's key names; `overrides` are RaftConfig attribute names."""
        unknown = set(overrides) - {a.name for a in attrs.fields(cls)}
        if unknown:
            raise RaftConfigError(f"unknown Raft setting(s): {sorted(unknown)}")
        return cls(
            group=controllerDLegerGroup,
            selfId=controllerDLegerSelfId,
            peers=controllerDLegerPeers,
            **overrides,
        )
