"""The producer's stuck-send rule (actors/client/stuck_sends.py): which unanswered sends look at
their route, and which are given up because their broker set has another master."""

from __future__ import annotations

import pytest
import trio

from rocketrio.actors.client.stuck_sends import PendingSend, stuck_master_changes

OLD, NEW = "10.0.0.1:10911", "10.0.0.2:10911"


def pending(started: float, addr: str = OLD, broker: str = "broker-a") -> PendingSend:
    return PendingSend("T", broker, addr, started, trio.CancelScope())


@pytest.mark.parametrize(
    ("started", "master", "refresh", "moved"),
    [
        (9.8, NEW, False, False),  # young: a normal send, nothing looked at
        (9.0, OLD, True, False),  # stuck, the route still names its master: ask for a route
        (9.0, None, True, False),  # the set between two masters: no change yet, keep asking
        (9.0, NEW, False, True),  # another master: give it up
    ],
)
def test_only_stuck_sends_whose_master_changed_are_given_up(
    started: float, master: str | None, refresh: bool, moved: bool
) -> None:
    p = pending(started)
    topics, gone = stuck_master_changes([p], 10.0, 0.5, lambda _b: master)
    assert topics == ({"T"} if refresh else set())
    assert gone == ([(p, NEW)] if moved else [])


def test_a_send_already_given_up_is_not_counted_twice() -> None:
    p = pending(0.0)
    p.moved_to = NEW
    assert stuck_master_changes([p], 10.0, 0.5, lambda _b: NEW) == (set(), [])
