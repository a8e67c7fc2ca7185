"""Events of `rocketrio up` (cli/up.py, cli/up_supervisor.py): the launcher and its children."""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


@event("child_exited")
@attrs.frozen(kw_only=True)
class ChildExited(LogEvent):
    """A child of `rocketrio up` exited (``exit_code`` None: killed by ``signal``); ``restart``
    is the restart this exit leads to, ``gave_up`` when `up` stopped restarting it."""

    stopping: bool
    gave_up: bool
    restart: int | None = None
    next_delay_s: float | None = None
    restarts: int | None = None
    child: str | None = None
    pid: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    ran_s: float | None = None


@event("child_started")
@attrs.frozen(kw_only=True)
class ChildStarted(LogEvent):
    """`rocketrio up` started a child (``restart`` 0: its first start)."""

    child: str
    pid: int
    restart: int


@event("child_stop_escalated", "warning")
@attrs.frozen(kw_only=True)
class ChildStopEscalated(LogEvent):
    """Child stop escalated: SIGKILL after the grace."""

    child: str
    pid: int
    grace_s: Json
    unkillable_after_s: Json | None = None


@event("up_started")
@attrs.frozen(kw_only=True)
class UpStarted(LogEvent):
    """Up started."""

    mode: str
    dir: str
    pid: int
    ports: Json


@event("up_stopped")
@attrs.frozen(kw_only=True)
class UpStopped(LogEvent):
    """Up stopped."""

    reason: str
    exit_code: int


@event("up_stopping")
@attrs.frozen(kw_only=True)
class UpStopping(LogEvent):
    """Up stopping."""

    reason: str
