"""Events of the shared kernel and the process: actor crashes (kernel/runtime.py), remoting
connections and requests (kernel/remoting.py), live config updates (kernel/live_update_service),
the /metrics endpoint (observe/metrics_http.py) and a process's start and stop (cli/main.py).
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


@event("actor_crashed", "error")
@attrs.frozen(kw_only=True)
class ActorCrashed(LogEvent):
    """Actor crashed."""

    restarting: bool
    backoff_s: float | None = None
    restart: int | None = None
    error: str | None = None


@event("bad_frame", "warning")
@attrs.frozen(kw_only=True)
class BadFrame(LogEvent):
    """Bad frame: the connection is closed."""

    suppressed: int | None = None
    remote: str | None = None
    reason: str | None = None
    error: str | None = None


@event("config_update_refused", "warning")
@attrs.frozen(kw_only=True)
class ConfigUpdateRefused(LogEvent):
    """Config update refused."""

    config_role: str
    keys: list[str]
    code: str
    remark: str
    by: str


@event("config_updated")
@attrs.frozen(kw_only=True)
class ConfigUpdated(LogEvent):
    """Config updated: started without a config file), by: one per key."""

    config_role: str
    key: Json
    old: str
    new: str
    persisted_to: Json
    by: str


@event("connection_idle_closed")
@attrs.frozen(kw_only=True)
class ConnectionIdleClosed(LogEvent):
    """Connection idle closed: info."""

    remote: str
    idle_s: float


@event("connection_read_timeout")
@attrs.frozen(kw_only=True)
class ConnectionReadTimeout(LogEvent):
    """Connection read timeout."""

    suppressed: int | None = None
    remote: str | None = None
    buffered: int | None = None
    missing: int | None = None
    timeout_s: float | None = None


@event("connection_refused")
@attrs.frozen(kw_only=True)
class ConnectionRefused(LogEvent):
    """Connection refused: over a connection cap (``reason``, ``why``)."""

    remote: str
    reason: str
    why: str
    suppressed: int | None = None


@event("metrics_request_failed", "warning")
@attrs.frozen(kw_only=True)
class MetricsRequestFailed(LogEvent):
    """A scrape of /metrics was not a well-formed HTTP request, or its connection broke."""

    error: str


@event("metrics_collect_failed", "error")
@attrs.frozen(kw_only=True)
class MetricsCollectFailed(LogEvent):
    """A collector raised while /metrics was rendered: that scrape is answered 500 and the
    server goes on (a metrics bug must not stop the broker, controller or NameServer)."""

    error: str


@event("metrics_listening")
@attrs.frozen(kw_only=True)
class MetricsListening(LogEvent):
    """The Prometheus endpoint is up (``addr``: where /metrics is served)."""

    addr: str


@event("process_failed", "error")
@attrs.frozen(kw_only=True)
class ProcessFailed(LogEvent):
    """Process failed: failed after it started; exits 1."""

    error: str | None = None
    traceback: str | None = None


@event("process_shutdown")
@attrs.frozen(kw_only=True)
class ProcessShutdown(LogEvent):
    """Process shutdown."""

    reason: str


@event("request_failed", "error")
@attrs.frozen(kw_only=True)
class RequestFailed(LogEvent):
    """Request failed."""

    code: str
    remote: str


@event("request_refused_busy", "warning")
@attrs.frozen(kw_only=True)
class RequestRefusedBusy(LogEvent):
    """Request refused busy."""

    code: str
    remote: str
    in_flight: Json
    limit: Json
    suppressed: int


@event("startup_failed", "error")
@attrs.frozen(kw_only=True)
class StartupFailed(LogEvent):
    """Startup failed: the process exits non-zero."""

    error: str | None = None
    traceback: str | None = None
