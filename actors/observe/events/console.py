"""Events of the web console (actors/console/): its server, its poller, the audited admin actions
and the console inside `rocketrio up`.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


@event("console_listening")
@attrs.frozen(kw_only=True)
class ConsoleListening(LogEvent):
    """The web console serves its page and websocket at ``url``; ``actions``: a token file
    was given, so actions with that token are carried out."""

    url: str
    actions: bool


@event("console_action")
@attrs.frozen(kw_only=True)
class ConsoleAction(LogEvent):
    """Audit: an admin action asked through the console, carried out (``ok``) or refused
    (``error``), with who asked (``peer``) and the arguments as sent."""

    action: str
    peer: str
    ok: bool
    error: str | None = None
    arguments: Json


@event("console_viewer_refused", "warning")
@attrs.frozen(kw_only=True)
class ConsoleViewerRefused(LogEvent):
    """A websocket or HTTP request the console turned away (bad Origin, too many viewers, a
    viewer too slow to read, a bad request)."""

    peer: str
    reason: str


@event("console_failed", "error")
@attrs.frozen(kw_only=True)
class ConsoleFailed(LogEvent):
    """The console inside `rocketrio up` stopped on an error; the cluster runs on without it."""

    error: str
    traceback: str


@event("console_poll_failed", "warning")
@attrs.frozen(kw_only=True)
class ConsolePollFailed(LogEvent):
    """A part of the cluster the console could not read this round (it keeps polling)."""

    addr: str
    error: str
