"""The pinning of an acting slave's POP records (failover/pop_pins.py): one master per CK, never
the own group, deterministic, remembered until acked."""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.failover.pop_pins import PopPins, choose_master
from rocketrio.protocol.pop_checkpoint import MergeKey

OWN = "broker-a"


def key(n: int) -> MergeKey:
    return ("C", "PG", 0, n, 1_700_000_000_000 + n, OWN)


def test_never_the_own_group_whatever_the_candidates_say() -> None:
    """A stale route may still list the dead master's own group (upstream #7923)."""
    for n in range(200):
        assert choose_master(key(n), [OWN, "broker-b", "broker-c"], OWN) in ("broker-b", "broker-c")
    assert choose_master(key(1), [OWN], OWN) is None
    assert choose_master(key(1), [], OWN) is None
    with pytest.raises(ValueError):
        PopPins(OWN).pin(key(1), OWN, 1)


def test_the_choice_is_deterministic_and_spreads() -> None:
    """Same key, same candidates (in any order): same master; different keys use both."""
    a = [choose_master(key(n), ["broker-b", "broker-c"], OWN) for n in range(100)]
    b = [choose_master(key(n), ["broker-c", "broker-b", "broker-c"], OWN) for n in range(100)]
    assert a == b
    assert set(a) == {"broker-b", "broker-c"}


def test_a_pinned_key_keeps_its_master_when_the_route_changes() -> None:
    """The CK went to one master: its ACKs follow it even when the candidates change (upstream
    rehashes over the current route, so CK and ACK can part)."""
    pins = PopPins(OWN)
    k = key(7)
    first = pins.target(k, ["broker-b", "broker-c"])
    assert first is not None
    pins.pin(k, first, 2)
    other = "broker-c" if first == "broker-b" else "broker-b"
    assert pins.target(k, [other]) == first
    assert pins.target(k, [other, "broker-d", "broker-e"]) == first
    assert pins.target(k, []) == first


def test_an_unpinned_key_is_not_pinned_by_asking() -> None:
    """A CK that was never written pins nothing: the next try may choose again."""
    pins = PopPins(OWN)
    assert pins.target(key(1), ["broker-b"]) == "broker-b"
    assert pins.pinned(key(1)) is None
    assert len(pins) == 0


def test_pins_are_forgotten_once_every_message_is_acked() -> None:
    pins = PopPins(OWN)
    pins.pin(key(1), "broker-b", 3)
    pins.acked(key(1), 1)
    pins.acked(key(1), 1)
    assert pins.pinned(key(1)) == "broker-b"
    pins.acked(key(1), 1)
    assert pins.pinned(key(1)) is None
    pins.acked(key(1), 1)  # a late duplicate ACK: nothing to forget
    pins.acked(key(2), 5)


def test_a_change_of_invisible_time_keeps_the_new_ck_on_the_old_master() -> None:
    """Pinned by the shell: new CK on the old CK's master, old CK's message acked."""
    pins = PopPins(OWN)
    pins.pin(key(1), "broker-c", 1)
    pins.pin(key(2), pins.target(key(1), ["broker-b"]) or "", 1)
    pins.acked(key(1), 1)
    assert pins.pinned(key(2)) == "broker-c"
    assert pins.pinned(key(1)) is None


def test_the_table_is_bounded_oldest_first() -> None:
    pins = PopPins(OWN, max_pins=3)
    for n in range(5):
        pins.pin(key(n), "broker-b", 1)
    assert len(pins) == 3
    assert pins.pinned(key(0)) is None and pins.pinned(key(1)) is None
    assert pins.pinned(key(4)) == "broker-b"
