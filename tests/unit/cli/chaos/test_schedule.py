"""The chaos fault schedule (pure): names, named and seeded schedules, timing bounds."""

from __future__ import annotations

import itertools

import pytest

from rocketrio.cli.chaos.schedule import (
    RANDOM_POOL,
    FaultKind,
    FaultStep,
    Role,
    ScheduleError,
    Timing,
    parse_fault,
    parse_seconds,
    plan,
    usable,
)


def test_a_fault_name_is_kind_and_role_and_combinations_join_with_plus() -> None:
    assert parse_fault("kill-master") == (FaultStep(FaultKind.KILL, Role.MASTER),)
    assert parse_fault("suspend-slave+kill-controller-leader") == (
        FaultStep(FaultKind.SUSPEND, Role.SLAVE),
        FaultStep(FaultKind.KILL, Role.CONTROLLER_LEADER),
    )
    assert parse_fault("partition-slave-from-master") == (
        FaultStep(FaultKind.PARTITION, Role.SLAVE, Role.MASTER),
    )
    for bad in (
        "kill",
        "explode-master",
        "kill-everyone",
        "kill-master+",
        "kill-slave-from-master",
    ):
        with pytest.raises(ScheduleError):
            parse_fault(bad)


def test_every_name_of_the_random_pool_parses() -> None:
    for name in RANDOM_POOL:
        assert "+".join(s.name for s in parse_fault(name)) == name


def test_named_schedule_repeats_the_fault_every_period_between_warmup_and_drain() -> None:
    t = Timing(duration_s=120, warmup_s=10, drain_s=20, every_s=30, hold_s=4)
    faults = plan(t, ("kill-master",), None)
    assert [f.at_s for f in faults] == [10, 40, 70, 100]
    assert all(f.name == "kill-master" and f.hold_s == 0 for f in faults)
    suspends = plan(t, ("suspend-slave",), None)
    assert [f.ends_s for f in suspends] == [14, 44, 74]  # 100 + 4 would end in the drain


def test_a_seed_replays_the_same_random_schedule_and_another_seed_differs() -> None:
    t = Timing(duration_s=1800, every_s=15, hold_s=4)
    a, b, c = plan(t, RANDOM_POOL, 7), plan(t, RANDOM_POOL, 7), plan(t, RANDOM_POOL, 8)
    assert a == b
    assert a != c
    assert len(a) >= 100  # the soak's 30 minutes hold 100 faults at this pace
    for f, g in itertools.pairwise(a):
        assert g.at_s >= f.ends_s + 1.0  # never two faults at once
    assert a[-1].ends_s <= 1800 - t.drain_s
    assert {f.name for f in a} == set(RANDOM_POOL)


def test_unavailable_kinds_are_left_out_and_nothing_left_is_an_error() -> None:
    pool = usable(RANDOM_POOL, frozenset({FaultKind.DISK_FULL, FaultKind.SLOW_DISK}))
    assert "disk-master" not in pool and "kill-master" in pool
    with pytest.raises(ScheduleError, match="no fault"):
        plan(Timing(duration_s=100), usable(("disk-master",), frozenset(FaultKind)), 1)


def test_timings_that_leave_no_room_are_refused() -> None:
    with pytest.raises(ScheduleError, match="no time"):
        plan(Timing(duration_s=25, warmup_s=10, drain_s=20), ("kill-master",), 1)
    with pytest.raises(ScheduleError, match="longer than"):
        plan(Timing(duration_s=100, every_s=3, hold_s=4), ("kill-master",), 1)


def test_durations_read_with_units() -> None:
    assert parse_seconds("30") == 30
    assert parse_seconds("30s") == 30
    assert parse_seconds("2m") == 120
    assert parse_seconds("1h") == 3600
    for bad in ("", "x", "-3s", "0"):
        with pytest.raises(ScheduleError):
            parse_seconds(bad)
