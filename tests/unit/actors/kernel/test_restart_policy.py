"""The restart policy shared by `runtime.supervise` and `up`: backoff, streaks, give-up."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.kernel.restart_policy import GiveUp, Restart, RestartPolicy, RestartTracker


def test_backoff_doubles_up_to_the_cap_then_gives_up() -> None:
    t = RestartTracker(RestartPolicy(1.0, 5.0, max_restarts=5, stable_after_s=60))
    got = [t.on_exit(ran_s=0.5) for _ in range(6)]
    assert got == [
        Restart(1.0, 1), Restart(2.0, 2), Restart(4.0, 3), Restart(5.0, 4), Restart(5.0, 5),
        GiveUp(5),
    ]  # fmt: skip


def test_a_stable_run_starts_a_new_streak() -> None:
    t = RestartTracker(RestartPolicy(1.0, 8.0, max_restarts=2, stable_after_s=60))
    assert t.on_exit(1) == Restart(1.0, 1)
    assert t.on_exit(1) == Restart(2.0, 2)
    # ran for a minute: healthy; the next crash is restart 1 again, from the minimum backoff
    assert t.on_exit(60) == Restart(1.0, 1)
    assert t.on_exit(59.9) == Restart(2.0, 2)
    assert t.on_exit(0) == GiveUp(2)


def test_stable_period_defaults_to_the_backoff_cap_and_no_limit_restarts_forever() -> None:
    t = RestartTracker(RestartPolicy(0.1, 5.0))
    for _ in range(100):
        assert isinstance(t.on_exit(0.0), Restart)
    assert t.on_exit(5.0) == Restart(0.1, 1)


def test_zero_restarts_gives_up_at_the_first_exit() -> None:
    assert RestartTracker(RestartPolicy(max_restarts=0)).on_exit(0) == GiveUp(0)


@pytest.mark.parametrize(
    "kwargs", [dict(backoff_min_s=0), dict(backoff_min_s=2, backoff_max_s=1), dict(max_restarts=-1)]
)
def test_bad_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RestartPolicy(**kwargs)  # type: ignore[arg-type]


@given(
    runs=st.lists(st.floats(min_value=0, max_value=120), max_size=40),
    lo=st.floats(min_value=0.01, max_value=2),
    factor=st.floats(min_value=1, max_value=50),
    limit=st.one_of(st.none(), st.integers(min_value=0, max_value=8)),
)
def test_decisions_follow_the_streak(
    runs: list[float], lo: float, factor: float, limit: int | None
) -> None:
    """Whatever the run lengths: a restart's number is the length of the current streak of short
    runs, its delay is min * 2^(n-1) capped, and GiveUp comes exactly when the streak exceeds the
    limit (after which the caller stops asking)."""
    policy = RestartPolicy(lo, lo * factor, limit, stable_after_s=30)
    t = RestartTracker(policy)
    streak = 0
    for ran in runs:
        streak = 1 if ran >= 30 else streak + 1
        d = t.on_exit(ran)
        if limit is not None and streak > limit:
            assert d == GiveUp(streak - 1)
            return
        assert isinstance(d, Restart)
        assert d.restart == streak
        assert d.delay_s == pytest.approx(min(lo * 2 ** (streak - 1), lo * factor))
        assert lo <= d.delay_s <= lo * factor
