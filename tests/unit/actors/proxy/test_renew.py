"""The auto renewal schedule (pure): what is due when, by upstream's renew policy and defaults;
the client's original handle maps to the latest one; stops after renewMaxTimeMillis, clears for
a client gone, gives up after maxRenewRetryTimes failures."""

from __future__ import annotations

import pytest

from rocketrio.actors.proxy.renew import (
    Kind,
    RenewConfig,
    RenewSchedule,
    Tracked,
    renew_config_of,
    renew_delay_ms,
    retry_delay_ms,
)

T0 = 1_000_000


def tracked(original: str = "h0", client: str = "c1", reconsume: int = 0) -> Tracked:
    return Tracked(
        client_id=client,
        group="G",
        topic="T",
        original=original,
        latest=original,
        consume_ms=T0,
        visible_ms=T0 + 60_000,
        reconsume_times=reconsume,
    )


def online(_client: str) -> bool:
    return True


def test_upstream_defaults() -> None:
    c = RenewConfig()
    assert (c.default_invisible_ms, c.ahead_ms, c.max_ms, c.period_ms) == (
        60_000,
        10_000,
        3 * 3_600_000,
        5_000,
    )
    assert (c.max_retry_times, c.clear_invisible_ms) == (3, 1_000)


def test_renew_policy_steps_and_retry_backoff() -> None:
    assert [renew_delay_ms(n) // 60_000 for n in range(8)] == [1, 3, 5, 10, 30, 60, 60, 60]
    # CustomizedRetryPolicy at reconsume times + 2: 10 s, 30 s, 1 min ... capped at 30 min
    assert [retry_delay_ms(n) // 1000 for n in (0, 1, 2, 100)] == [10, 30, 60, 1800]


def test_due_only_within_the_ahead_time() -> None:
    s = RenewSchedule(RenewConfig())
    s.add(tracked())
    assert s.due(T0 + 49_999, online) == []
    [r] = s.due(T0 + 50_000, online)
    assert (r.kind, r.latest, r.invisible_ms) == (Kind.RENEW, "h0", 60_000)


def test_renewed_moves_latest_and_steps_the_policy_take_returns_latest() -> None:
    s = RenewSchedule(RenewConfig())
    s.add(tracked())
    [r] = s.due(T0 + 50_000, online)
    s.renewed(r, "h1", T0 + 110_000)
    assert s.due(T0 + 99_999, online) == []
    [r2] = s.due(T0 + 100_000, online)
    assert (r2.latest, r2.invisible_ms) == ("h1", 180_000)
    s.renewed(r2, "h2", T0 + 280_000)
    # the client acks with its original handle: the latest one is to be acked
    assert s.take("G", "h0") == "h2"
    assert s.take("G", "h0") is None  # no longer renewed
    assert s.take("G", "unknown") is None


def test_stop_after_the_max_span_with_the_retry_backoff() -> None:
    s = RenewSchedule(RenewConfig(max_ms=100_000))
    s.add(tracked(reconsume=1))
    s.tracked[("G", "h0")].visible_ms = T0 + 105_000
    [r] = s.due(T0 + 100_000, online)
    assert (r.kind, r.invisible_ms) == (Kind.STOP, 30_000)
    assert s.tracked == {}


def test_clear_for_a_client_gone_only() -> None:
    s = RenewSchedule(RenewConfig())
    s.add(tracked("a", client="gone"))
    s.add(tracked("b", client="here"))
    [r] = s.due(T0, lambda c: c == "here")  # nothing due for "here" yet
    assert (r.kind, r.original, r.invisible_ms) == (Kind.CLEAR, "a", 1_000)
    assert list(s.tracked) == [("G", "b")]


def test_gives_up_after_max_retry_failures() -> None:
    s = RenewSchedule(RenewConfig())
    s.add(tracked())
    for attempt in range(3):
        [r] = s.due(T0 + 50_000, online)
        assert s.failed(r) == (attempt == 2)
    assert s.tracked == {}


def test_a_success_resets_the_retry_count() -> None:
    s = RenewSchedule(RenewConfig())
    s.add(tracked())
    for _ in range(2):
        [r] = s.due(T0 + 50_000, online)
        assert not s.failed(r)
    s.renewed(r, "h1", T0 + 110_000)
    for _ in range(2):
        [r] = s.due(T0 + 100_000, online)
        assert not s.failed(r)
    assert s.take("G", "h0") == "h1"


def test_config_file_keys() -> None:
    c = renew_config_of({"renewAheadTimeMillis": "2000", "renewMaxTimeMillis": "60000"})
    assert (c.ahead_ms, c.max_ms, c.period_ms, c.enabled) == (2_000, 60_000, 5_000, True)
    assert not renew_config_of({"enableProxyAutoRenew": "false"}).enabled
    for bad in ({"renewMaxTimeMillis": "3h"}, {"maxRenewRetryTimes": "0"},
                {"enableProxyAutoRenew": "yes"}):  # fmt: skip
        with pytest.raises(ValueError, match=next(iter(bad))):
            renew_config_of(bad)
