"""Pre-online of a returning SLAVE (RIP-32 BrokerPreOnlineService, slave side; SPEC A4), pure:
what the isolated slave does next, from the group's live members and what it has done so far.

A slave restarting with acting master on (and not skipPreOnline) starts isolated, like a
returning master (pre_online.py): no registration, no heartbeat, no acting, no special service.
Without this, a restarting slave that is the group's smallest live id would register and act at
once: routed as id 0 with the offsets and delay progress it had on disk, older than those the
slave acting meanwhile moved (consumers would re-read, delays re-fire). Each round (every
`pre_online.RETRY_S`) the shell polls the live members and asks `slave_step`:

- no NameServer answered: `Wait` (losing the NameServers is no evidence about the group);
- a master (id 0) is listed: `FollowMaster` (EXCHANGE_BROKER_HA_INFO pull of its HA address,
  follow it) until the HA handshake with it is done (the master's first transfer header
  arrived), then `GoOnline`; slave sync copies the master's tables after that, as always;
- no master, another slave listed: that slave (the smallest listed id) is the acting one:
  `PullFrom` it (GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET, per-queue maxima, as the master
  side does) until a pull succeeded, then `GoOnline`;
- nobody else listed: `GoOnline` at once (nothing newer exists anywhere).

This broker's own id is ignored in the list: a registration left from before the restart may
still be listed until the NameServer drops it.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

MASTER_ID = 0


@attrs.frozen
class Wait:
    """No member list this round: try again."""


@attrs.frozen
class FollowMaster:
    """A master is alive: take its HA info and follow it; online once the handshake is done."""

    master_addr: str


@attrs.frozen
class PullFrom:
    """No master; this slave acts for it: take its newer offsets first."""

    broker_id: int
    addr: str


@attrs.frozen
class GoOnline:
    """Register, heartbeat, and act if this broker is then the smallest live id."""

    reason: str


SlaveStep = Wait | FollowMaster | PullFrom | GoOnline


def slave_step(
    my_id: int,
    members: Mapping[int, str] | None,
    *,
    handshake_done: bool,
    pulled: frozenset[str],
) -> SlaveStep:
    """The next step of an isolated slave (module docstring). ``members``: the live members
    (None: no NameServer answered); ``handshake_done``: the HA link to the master followed is in
    transfer; ``pulled``: the addresses whose offsets were already merged."""
    if members is None:
        return Wait()
    others = {bid: addr for bid, addr in members.items() if bid != my_id}
    master = others.get(MASTER_ID)
    if master is not None:
        return GoOnline("master handshake done") if handshake_done else FollowMaster(master)
    if not others:
        return GoOnline("no other member alive")
    acting_id = min(others)
    acting_addr = others[acting_id]
    if acting_addr in pulled:
        return GoOnline("acting slave's offsets merged")
    return PullFrom(acting_id, acting_addr)
