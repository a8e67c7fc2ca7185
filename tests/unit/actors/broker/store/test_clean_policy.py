"""The retention policy's rules (clean_policy.py): triggers, expiry, bounds, never the last."""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.store.clean_policy import (
    HOUR_MS,
    CleanConfig,
    CleanPlan,
    ReplicaLink,
    Segment,
    clean_forcibly_ratio,
    hour_of_day,
    max_used_ratio,
    parse_delete_when,
    plan_clean,
    replica_floor,
)

SEG = 1000
NOW = 1_800_000_000_000


def segs(closed_hours_ago: list[float]) -> list[Segment]:
    """Closed segments (closed that many hours before NOW), then the open last one."""
    out = [
        Segment(i * SEG, (i + 1) * SEG, NOW - round(h * HOUR_MS))
        for i, h in enumerate(closed_hours_ago)
    ]
    n = len(closed_hours_ago)
    out.append(Segment(n * SEG, n * SEG + 10, None))
    return out


CFG = CleanConfig(file_reserved_ms=72 * HOUR_MS, delete_when=frozenset({4}))


def plan(
    segments: list[Segment],
    *,
    hour: int = 4,
    usage: float | None = 0.5,
    safe_end: int = 10**12,
    config: CleanConfig = CFG,
    **kw: object,
) -> CleanPlan:
    return plan_clean(
        segments, now_ms=NOW, hour=hour, usage=usage, safe_end=safe_end, config=config, **kw
    )  # type: ignore[arg-type]


def test_delete_when_forms() -> None:
    assert parse_delete_when("04") == {4}
    assert parse_delete_when("04;16") == {4, 16}
    assert parse_delete_when(" 4 ; 23 ;") == {4, 23}
    for bad in ("", ";", "24", "4pm", "-1", "04,16"):
        with pytest.raises(ValueError, match="deleteWhen"):
            parse_delete_when(bad)


def test_upstream_clamps() -> None:
    assert clean_forcibly_ratio(95) == 0.85 and clean_forcibly_ratio(10) == 0.30
    assert clean_forcibly_ratio(60) == 0.60
    assert max_used_ratio(99) == 0.95 and max_used_ratio(1) == 0.10 and max_used_ratio(75) == 0.75


def test_at_the_delete_hour_expired_segments_go_oldest_first_and_never_the_last() -> None:
    p = plan(segs([100, 80, 73, 10]))
    assert p == CleanPlan((0, SEG, 2 * SEG), "time", False, None)
    # every segment expired: still not the last (current) one
    assert plan(segs([100, 90])).delete == (0, SEG)


def test_reservation_boundary_is_inclusive_like_upstream() -> None:
    exactly = [Segment(0, SEG, NOW - 72 * HOUR_MS), Segment(SEG, SEG + 1, None)]
    assert plan(exactly).delete == (0,)
    young = [Segment(0, SEG, NOW - 72 * HOUR_MS + 1), Segment(SEG, SEG + 1, None)]
    assert plan(young).delete == ()


def test_outside_the_delete_hour_nothing_goes_unless_space_or_manual() -> None:
    s = segs([100, 80])
    assert plan(s, hour=5) == CleanPlan()
    assert plan(s, hour=5, manual=True) == CleanPlan((0, SEG), "manual", False, None)
    over_max = plan(s, hour=5, usage=0.80)
    assert over_max.trigger == "space" and over_max.delete == (0, SEG)
    assert not over_max.forced


def test_a_young_segment_stops_the_round_upstream_never_deletes_in_the_middle() -> None:
    assert plan(segs([100, 1, 100])).delete == (0,)
    assert plan(segs([1, 100])).delete == ()


def test_forced_cleaning_ignores_age_above_the_forcibly_ratio() -> None:
    s = segs([1, 1, 1])
    forced = plan(s, hour=5, usage=0.86)
    assert forced == CleanPlan((0, SEG, 2 * SEG), "forced", True, None)
    # above the disk-full ratio as well, even with a lower forcibly ratio configured higher
    cfg = CleanConfig(clean_forcibly_ratio=0.85, warning_ratio=0.60)
    assert plan(s, hour=5, usage=0.70, config=cfg).forced
    # cleanFileForciblyEnable=false: a space round, but only expired segments
    off = CleanConfig(clean_file_forcibly_enable=False)
    p = plan(s, hour=5, usage=0.86, config=off)
    assert (p.trigger, p.forced, p.delete) == ("space", False, ())


def test_unknown_usage_reclaims_but_never_forces() -> None:
    p = plan(segs([100, 1]), hour=5, usage=-1)
    assert (p.trigger, p.forced, p.delete) == ("space", False, (0,))
    assert plan(segs([1, 1]), hour=5, usage=None).delete == ()


def test_safe_end_holds_what_a_reader_still_needs() -> None:
    p = plan(segs([100, 100, 100]), safe_end=2 * SEG)
    assert p.delete == (0, SEG) and p.held_at == 2 * SEG
    assert plan(segs([100]), safe_end=SEG - 1) == CleanPlan((), "time", False, 0)


def test_forced_round_uses_its_own_bound() -> None:
    s = segs([1, 1, 1])
    p = plan(s, hour=5, usage=0.9, safe_end=SEG, forced_safe_end=3 * SEG)
    assert p.delete == (0, SEG, 2 * SEG)
    p = plan(segs([100, 100]), safe_end=SEG, forced_safe_end=3 * SEG)
    assert p.delete == (0,) and p.held_at == SEG  # not forced: the strict bound


def test_batch_max() -> None:
    cfg = CleanConfig(delete_file_batch_max=2)
    assert plan(segs([100] * 5), config=cfg).delete == (0, SEG)


def test_a_segment_whose_close_time_is_unknown_is_kept() -> None:
    s = [
        Segment(0, SEG, None),
        Segment(SEG, 2 * SEG, NOW - 100 * HOUR_MS),
        Segment(2 * SEG, 0, None),
    ]
    assert plan(s).delete == ()


def test_fractional_hours_and_hour_of_day() -> None:
    cfg = CleanConfig.of(
        file_reserved_hours=0.001,  # 3.6 s
        delete_when="04;16",
        disk_max_used_space_ratio=75,
        disk_space_clean_forcibly_ratio=85,
        warning_ratio=0.9,
        clean_file_forcibly_enable=True,
        delete_file_batch_max=10,
    )
    assert cfg.file_reserved_ms == pytest.approx(3600)
    s = [Segment(0, SEG, NOW - 3600), Segment(SEG, SEG + 1, None)]
    assert plan(s, hour=16, config=cfg).delete == (0,)
    assert 0 <= hour_of_day(NOW) <= 23


def test_replica_floor() -> None:
    links = [
        ReplicaLink(1, 5000, 5000),  # in sync
        ReplicaLink(2, 1200, 1200),  # lagging, out of the set
        ReplicaLink(None, -1, -1),  # still in its handshake
    ]
    assert replica_floor([], frozenset({0}), in_sync_only=False) is None
    assert replica_floor(links, frozenset({0, 1}), in_sync_only=False) == 0
    assert replica_floor(links[:2], frozenset({0, 1}), in_sync_only=False) == 1200
    assert replica_floor(links, frozenset({0, 1}), in_sync_only=True) == 5000
    assert replica_floor([ReplicaLink(1, -1, 700)], frozenset(), in_sync_only=False) == 700
    assert replica_floor(links, frozenset({0}), in_sync_only=True) is None
