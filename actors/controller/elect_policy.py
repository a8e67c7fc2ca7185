"""ElectMaster policy: which replica of a broker set becomes master. Pure: liveness and the
brokers' last heartbeats come in as functions.

Order (upstream DefaultElectPolicy, checked against apache/rocketmq's controller module):
1. Candidates are the SyncStateSet members that pass `is_valid` (alive). Only if that round
   elects nobody, and the caller passes `all_replica_brokers` (enableElectUncleanMaster=true),
   a second round runs over every registered replica: such a master may lack acknowledged
   messages, which is why it is off by default.
2. Within a round: the old master wins if it is still valid and nobody else was designated.
3. A designated broker (admin `electMaster -b`) is elected if it is a valid candidate of the
   round; otherwise that round elects nobody (no silent fallback to someone else).
4. Otherwise the best heartbeat wins: highest epoch, then highest maxOffset, then lowest
   electionPriority value. Upstream then takes whichever its TreeSet met first (hash order);
   we break the last tie by the lowest brokerId so every controller replica agrees.
Returns the brokerId or None (the caller answers CONTROLLER_MASTER_NOT_AVAILABLE when the
controller triggered the election, CONTROLLER_ELECT_MASTER_FAILED otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from rocketrio.actors.controller.heartbeat_manager import DEFAULT_ELECTION_PRIORITY, BrokerLiveInfo

BrokerValidPredicate = Callable[[int], bool]
BrokerLiveInfoGetter = Callable[[int], BrokerLiveInfo | None]


class ElectPolicy(Protocol):
    """Signature of an election policy (the default is `elect`)."""

    def __call__(
        self,
        *,
        sync_state_brokers: Iterable[int],
        all_replica_brokers: Iterable[int] | None,
        old_master: int | None,
        prefer_broker_id: int | None,
        is_valid: BrokerValidPredicate,
        live_info: BrokerLiveInfoGetter,
    ) -> int | None: ...


def candidate_rank(broker_id: int, info: BrokerLiveInfo | None) -> tuple[int, int, int, int]:
    """Sort key, smallest first: (-epoch, -maxOffset, electionPriority, brokerId)."""
    if info is None:
        return (1, 1, DEFAULT_ELECTION_PRIORITY, broker_id)
    return (-info.epoch, -info.max_offset, info.election_priority, broker_id)


def _try_elect(
    brokers: Iterable[int],
    old_master: int | None,
    prefer_broker_id: int | None,
    is_valid: BrokerValidPredicate,
    live_info: BrokerLiveInfoGetter,
) -> int | None:
    valid = sorted({b for b in brokers if is_valid(b)})
    if not valid:
        return None
    if old_master in valid and (prefer_broker_id is None or prefer_broker_id == old_master):
        return old_master
    if prefer_broker_id is not None:
        return prefer_broker_id if prefer_broker_id in valid else None
    return min(valid, key=lambda b: candidate_rank(b, live_info(b)))


def elect(
    *,
    sync_state_brokers: Iterable[int],
    all_replica_brokers: Iterable[int] | None,
    old_master: int | None,
    prefer_broker_id: int | None,
    is_valid: BrokerValidPredicate,
    live_info: BrokerLiveInfoGetter,
) -> int | None:
    """The new master's brokerId (possibly `old_master` again), or None if nobody qualifies."""
    new_master = _try_elect(sync_state_brokers, old_master, prefer_broker_id, is_valid, live_info)
    if new_master is None and all_replica_brokers is not None:
        new_master = _try_elect(
            all_replica_brokers, old_master, prefer_broker_id, is_valid, live_info
        )
    return new_master
