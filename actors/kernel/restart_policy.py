"""The restart policy of every supervisor: exponential backoff and a give-up limit, as pure code.

A supervised thing (an actor task in `runtime.supervise`, a child process under `rocketrio up`)
ends; the supervisor tells its `RestartTracker` how long that run lasted and gets back a decision:
`Restart` after a delay, or `GiveUp`. No clock, no I/O: the caller measures the run on its own
clock and carries the decision out, so the policy is tested as a table and with hypothesis.

The rules:
- the first restart of a streak waits ``backoff_min_s``; each further one doubles the wait, capped
  at ``backoff_max_s``;
- a run that lasted at least ``stable_after_s`` (default: ``backoff_max_s``) was healthy: the
  streak ends, the next crash starts again from ``backoff_min_s`` and from restart number 1;
- ``max_restarts`` bounds the restarts of one streak: the crash after the last allowed restart
  is a `GiveUp` (something that keeps dying right after start is a configuration problem, not a
  crash to paper over). ``None`` restarts forever.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class RestartPolicy:
    backoff_min_s: float = 0.1
    backoff_max_s: float = 5.0
    max_restarts: int | None = None
    stable_after_s: float | None = None

    def __attrs_post_init__(self) -> None:
        if not 0 < self.backoff_min_s <= self.backoff_max_s:
            raise ValueError(
                f"backoff needs 0 < min <= max, got {self.backoff_min_s}..{self.backoff_max_s}"
            )
        if self.max_restarts is not None and self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {self.max_restarts}")

    @property
    def stable_s(self) -> float:
        return self.backoff_max_s if self.stable_after_s is None else self.stable_after_s


@attrs.frozen
class Restart:
    """Start it again after ``delay_s``; this is restart ``restart`` of the current streak."""

    delay_s: float
    restart: int


@attrs.frozen
class GiveUp:
    """Stop restarting: ``restarts`` restarts in a row did not give a run of ``stable_s``."""

    restarts: int


Decision = Restart | GiveUp


class RestartTracker:
    """The state of one supervised thing under a `RestartPolicy`."""

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        self.restarts = 0  # restarts in the current streak
        self._next_delay_s = policy.backoff_min_s

    def on_exit(self, ran_s: float) -> Decision:
        """It ended after running ``ran_s`` seconds (crash or unexpected exit): what now?"""
        p = self.policy
        if ran_s >= p.stable_s:
            self.restarts = 0
            self._next_delay_s = p.backoff_min_s
        if p.max_restarts is not None and self.restarts >= p.max_restarts:
            return GiveUp(self.restarts)
        self.restarts += 1
        delay = self._next_delay_s
        self._next_delay_s = min(delay * 2, p.backoff_max_s)
        return Restart(delay, self.restarts)
