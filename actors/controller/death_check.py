"""Confirming a master's death with a majority of the controller group (upstream #4800). Pure.

Each controller replica keeps its own broker liveness table; only the leader acts on it. A cut
between the master and the leader alone (the master still reaches the other replicas, its slaves
and its clients) made the leader depose a healthy master. So before deposing, the leader asks
every other replica for its own verdict on that master (CONTROLLER_CHECK_BROKER_ALIVE, answered
from the replica's table, no Raft round) and `tally_death` decides:

- the group is the configured Raft peers (controllerDLegerPeers), the leader included;
- the death is confirmed when DEAD verdicts reach a majority of the group (group // 2 + 1); the
  leader's own verdict is one of them, so with one replica nothing changes, and in a group of 3
  or more the leader's word alone never suffices;
- ALIVE, UNKNOWN (a replica still in its listening window) and no answer (down, partitioned,
  slower than the deadline) all count as "cannot confirm dead";
- the round is decided as soon as the outcome cannot change: confirmed, or so few replicas are
  left to answer that DEAD cannot reach the majority any more. A real crash is seen by every
  replica (its connections close), so it is confirmed by the first peer's answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from rocketrio.protocol.controller_headers import BrokerAliveVerdict

V = BrokerAliveVerdict


def majority(group_size: int) -> int:
    """Votes needed out of `group_size` replicas."""
    if group_size <= 0:
        raise ValueError(f"a controller group has at least one replica, got {group_size}")
    return group_size // 2 + 1


@attrs.frozen(slots=True)
class DeathTally:
    """Who said what about one broker; replica ids sorted within each field."""

    group_size: int
    dead: tuple[str, ...] = ()
    alive: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    no_answer: tuple[str, ...] = ()  # asked, no answer (yet, or before the deadline)

    @property
    def quorum(self) -> int:
        return majority(self.group_size)

    @property
    def confirmed(self) -> bool:
        """A majority of the group finds the broker dead: it may be deposed."""
        return len(self.dead) >= self.quorum

    @property
    def cannot_confirm(self) -> bool:
        """Even if every missing answer came back DEAD, there would be no majority."""
        return len(self.dead) + len(self.no_answer) < self.quorum

    @property
    def decided(self) -> bool:
        return self.confirmed or self.cannot_confirm

    def fields(self) -> dict[str, Any]:
        """The tally as log fields."""
        return {
            "dead": list(self.dead),
            "alive": list(self.alive),
            "unknown": list(self.unknown),
            "no_answer": list(self.no_answer),
            "quorum": self.quorum,
            "group_size": self.group_size,
        }


def tally_death(group: Iterable[str], answers: Mapping[str, BrokerAliveVerdict]) -> DeathTally:
    """Count `answers` (replica id -> verdict, the leader's own included) over `group`."""
    ids = sorted(set(group))
    stray = sorted(set(answers) - set(ids))
    if stray:
        raise ValueError(f"answers from replicas outside the group {ids}: {stray}")

    def said(verdict: BrokerAliveVerdict) -> tuple[str, ...]:
        return tuple(i for i in ids if answers.get(i) == verdict)

    return DeathTally(
        group_size=len(ids),
        dead=said(V.DEAD),
        alive=said(V.ALIVE),
        unknown=said(V.UNKNOWN),
        no_answer=tuple(i for i in ids if i not in answers),
    )
