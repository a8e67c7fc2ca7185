"""Events of `rocketrio chaos` (cli/chaos/): each fault it injects, heals or skips, and the run."""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


@event("chaos_started")
@attrs.frozen(kw_only=True)
class ChaosStarted(LogEvent):
    """A chaos run began: its id, seed (None: a named schedule) and planned faults."""

    run_id: str
    seed: int | None = None
    planned: int
    unavailable: Json


@event("chaos_fault_injected", "warning")
@attrs.frozen(kw_only=True)
class ChaosFaultInjected(LogEvent):
    """One step of a fault was injected into a process."""

    run_id: str
    fault_index: int
    fault: str
    step: str
    child: str
    pid: int


@event("chaos_fault_healed")
@attrs.frozen(kw_only=True)
class ChaosFaultHealed(LogEvent):
    """A fault's steps were undone (SIGCONT, filters removed, ballast deleted)."""

    run_id: str
    fault_index: int
    fault: str


@event("chaos_fault_skipped")
@attrs.frozen(kw_only=True)
class ChaosFaultSkipped(LogEvent):
    """A step could not be injected now (no process in that role, mid-failover...)."""

    run_id: str
    fault_index: int
    fault: str
    step: str
    reason: str


@event("chaos_finished")
@attrs.frozen(kw_only=True)
class ChaosFinished(LogEvent):
    """The run ended: its verdict (the breached checks) and exit status."""

    run_id: str
    acked: int
    breaches: list[str]
    exit_code: int
    interrupted: bool
