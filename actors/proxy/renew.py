"""Auto renewal of invisible time for messages a PushConsumer received with ``auto_renew``.

Upstream's proxy (ReceiptHandleProcessor / DefaultReceiptHandleManager) keeps, per client and
group, the messages it handed out with ``auto_renew`` and, every ``renewSchedulePeriodMillis``
(5 s), extends the invisible time of each one due within ``renewAheadTimeMillis`` (10 s) with
CHANGE_MESSAGE_INVISIBLETIME, by its RenewStrategyPolicy (1, 3, 5, 10, 30 min, then hourly).
Each renewal gives a new receipt handle; the client still holds the original, so an ack,
change or forward from the client takes the latest one from here. Renewal stops when the client
acks / changes / forwards the message; when the client is gone (its Telemetry stream closed or
NotifyClientTermination), the message is made visible again in ``invisibleTimeMillisWhenClear``
(1 s); after ``renewMaxTimeMillis`` (3 h) it is handed back with the group's retry backoff
(CustomizedRetryPolicy, index reconsume times + 2); after ``maxRenewRetryTimes`` (3) failed
attempts it is left to the broker's revive.

This state lives in one proxy only: after a restart, the client's original handle names a
checkpoint the broker has already replaced, so its ack is answered OK by the broker but does
not stop the later checkpoint: the message is delivered again after its latest invisible time
(at least once, never lost).

`RenewSchedule` is the pure core (time comes in as ``now_ms``); `AutoRenewer` is its Trio shell.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping

import attrs
import structlog
import trio

from rocketrio.actors.observe import events

log = structlog.get_logger("proxy")

RENEW_STEPS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)
RETRY_STEPS_MS = tuple(
    s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800)
)


@attrs.frozen
class RenewConfig:
    """Upstream's ProxyConfig keys and defaults."""

    enabled: bool = True  # enableProxyAutoRenew: off, auto_renew is ignored
    default_invisible_ms: int = 60_000  # defaultInvisibleTimeMills: an auto_renew receive's
    ahead_ms: int = 10_000  # renewAheadTimeMillis
    max_ms: int = 3 * 3_600_000  # renewMaxTimeMillis
    period_ms: int = 5_000  # renewSchedulePeriodMillis
    max_retry_times: int = 3  # maxRenewRetryTimes
    clear_invisible_ms: int = 1_000  # invisibleTimeMillisWhenClear
    # rocketrio's bound (upstream has none): messages under renewal in this proxy; an
    # auto_renew receive that could pass it is refused with TOO_MANY_REQUESTS before popping
    max_tracked: int = 100_000


# upstream key in the proxy's config file -> RenewConfig attribute
CONFIG_KEYS = {
    "defaultInvisibleTimeMills": "default_invisible_ms",
    "renewAheadTimeMillis": "ahead_ms",
    "renewMaxTimeMillis": "max_ms",
    "renewSchedulePeriodMillis": "period_ms",
    "renewMaxTrackedMessages": "max_tracked",  # rocketrio's own key
    "maxRenewRetryTimes": "max_retry_times",
    "invisibleTimeMillisWhenClear": "clear_invisible_ms",
}


def renew_config_of(conf: Mapping[str, str]) -> RenewConfig:
    """The renew settings of a proxy config file (ValueError naming a bad key's value)."""
    values: dict[str, object] = {}
    for key, attr in CONFIG_KEYS.items():
        if key in conf:
            try:
                values[attr] = int(conf[key])
            except ValueError:
                raise ValueError(f"{key}={conf[key]!r} is not a whole number") from None
            if values[attr] <= 0:  # type: ignore[operator]
                raise ValueError(f"{key}={conf[key]} must be positive")
    enabled = conf.get("enableProxyAutoRenew", "true").strip().lower()
    if enabled not in ("true", "false"):
        raise ValueError(f"enableProxyAutoRenew={enabled!r} is not true or false")
    return RenewConfig(enabled=enabled == "true", **values)  # type: ignore[arg-type]


class Kind(enum.Enum):
    RENEW = "renew"  # extend by the renew policy
    STOP = "stop"  # renewMaxTimeMillis passed: back to the group with its retry backoff
    CLEAR = "clear"  # the client is gone: visible again soon


@attrs.define
class Tracked:
    client_id: str
    group: str
    topic: str
    original: str  # the handle the client holds
    latest: str  # the handle of the broker's current checkpoint
    consume_ms: int  # when the proxy handed it out
    visible_ms: int  # when it becomes visible unless renewed
    reconsume_times: int = 0
    renew_times: int = 0
    retry_times: int = 0


@attrs.frozen
class Renewal:
    """One CHANGE_MESSAGE_INVISIBLETIME to make: ``latest`` invisible for ``invisible_ms``."""

    kind: Kind
    group: str
    original: str
    topic: str
    latest: str
    invisible_ms: int


def renew_delay_ms(renew_times: int) -> int:
    return RENEW_STEPS_MS[min(max(renew_times, 0), len(RENEW_STEPS_MS) - 1)]


def retry_delay_ms(reconsume_times: int) -> int:
    return RETRY_STEPS_MS[min(max(reconsume_times, 0) + 2, len(RETRY_STEPS_MS) - 1)]


class RenewSchedule:
    """The messages under auto renewal, by (group, original handle)."""

    def __init__(self, config: RenewConfig) -> None:
        self.config = config
        self.tracked: dict[tuple[str, str], Tracked] = {}

    def add(self, entry: Tracked) -> None:
        self.tracked[(entry.group, entry.original)] = entry

    def has_room(self, count: int) -> bool:
        """Whether ``count`` more messages fit under ``max_tracked``."""
        return len(self.tracked) + count <= self.config.max_tracked

    def take(self, group: str, handle: str) -> str | None:
        """The client acks / changes / forwards ``handle``: stop renewing it; the handle to use
        (the latest), or None when it is not under renewal here."""
        entry = self.tracked.pop((group, handle), None)
        return None if entry is None else entry.latest

    def due(self, now_ms: int, online: Callable[[str], bool]) -> list[Renewal]:
        """What to do now: renewals of messages visible within ``ahead_ms``; a stop for those
        past ``max_ms``; a clear for those of clients not ``online``. Stops and clears leave
        the schedule at once; renewals stay until `renewed` or `failed`."""
        out: list[Renewal] = []
        for key, e in list(self.tracked.items()):
            if not online(e.client_id):
                del self.tracked[key]
                out.append(self._renewal(Kind.CLEAR, e, self.config.clear_invisible_ms))
            elif e.visible_ms - now_ms > self.config.ahead_ms:
                continue
            elif now_ms - e.consume_ms >= self.config.max_ms:
                del self.tracked[key]
                out.append(self._renewal(Kind.STOP, e, retry_delay_ms(e.reconsume_times)))
            else:
                out.append(self._renewal(Kind.RENEW, e, renew_delay_ms(e.renew_times)))
        return out

    @staticmethod
    def _renewal(kind: Kind, e: Tracked, invisible_ms: int) -> Renewal:
        return Renewal(kind, e.group, e.original, e.topic, e.latest, invisible_ms)

    def renewed(self, r: Renewal, new_handle: str, visible_ms: int) -> None:
        entry = self.tracked.get((r.group, r.original))
        if entry is None:
            return
        entry.latest, entry.visible_ms = new_handle, visible_ms
        entry.renew_times += 1
        entry.retry_times = 0

    def failed(self, r: Renewal) -> bool:
        """A renewal failed; True when it is given up (``max_retry_times`` reached)."""
        entry = self.tracked.get((r.group, r.original))
        if entry is None:
            return True
        entry.retry_times += 1
        if entry.retry_times >= self.config.max_retry_times:
            del self.tracked[(r.group, r.original)]
            return True
        return False


RENEW_CONCURRENCY = 16  # changes in flight at once (upstream: a pool of renewMaxThreadPoolNums)
ChangeInvisible = Callable[[Renewal], Awaitable[tuple[str, int]]]  # -> (new handle, visible ms)


class AutoRenewer:
    """The Trio shell: every ``period_ms`` runs the due renewals (``change``: the
    CHANGE_MESSAGE_INVISIBLETIME call). A client's ack waits for an in-flight renewal of the
    same message (`release`), so it acks the checkpoint the renewal made."""

    def __init__(
        self,
        config: RenewConfig,
        change: ChangeInvisible,
        online: Callable[[str], bool],
        now_ms: Callable[[], int],
    ) -> None:
        self.schedule = RenewSchedule(config)
        self.change = change
        self.online = online
        self.now_ms = now_ms
        self._busy: dict[tuple[str, str], trio.Event] = {}
        self._limiter = trio.CapacityLimiter(RENEW_CONCURRENCY)

    def track(self, entry: Tracked) -> None:
        self.schedule.add(entry)

    async def release(self, group: str, handle: str) -> str:
        """The handle to ack / change / forward with instead of the client's ``handle``."""
        busy = self._busy.get((group, handle))
        if busy is not None:
            await busy.wait()
        return self.schedule.take(group, handle) or handle

    def release_nowait(self, group: str, handle: str) -> str | None:
        """`release` without waiting; None (and nothing released) while a renewal of
        ``handle`` is under way: then `release` must be awaited."""
        if (group, handle) in self._busy:
            return None
        return self.schedule.take(group, handle) or handle

    async def run(self) -> None:
        while True:
            await self.renew_due()
            await trio.sleep(self.schedule.config.period_ms / 1000)

    async def renew_due(self) -> None:
        due = self.schedule.due(self.now_ms(), self.online)
        if not due:
            return
        # marked busy before any checkpoint: an ack arriving meanwhile waits for the renewal
        # instead of acking a checkpoint the renewal is about to replace
        for r in due:
            self._busy[(r.group, r.original)] = trio.Event()
        async with trio.open_nursery() as nursery:
            for r in due:
                nursery.start_soon(self._one, r)

    async def _one(self, r: Renewal) -> None:
        key = (r.group, r.original)
        done = self._busy[key]
        try:
            try:
                async with self._limiter:
                    new_handle, visible_ms = await self.change(r)
            except Exception as e:  # a broker refusal or a lost connection: retried next period
                gave_up = r.kind is not Kind.RENEW or self.schedule.failed(r)
                events.emit(
                    log,
                    events.ProxyRenewFailed(
                        kind=r.kind.value,
                        group=r.group,
                        topic=r.topic,
                        error=repr(e),
                        gave_up=gave_up,
                    ),
                )
                return
            if r.kind is Kind.RENEW:
                self.schedule.renewed(r, new_handle, visible_ms)
        finally:
            del self._busy[key]
            done.set()
        events.emit(
            log,
            events.ProxyRenewed(
                kind=r.kind.value, group=r.group, topic=r.topic, invisible_ms=r.invisible_ms
            ),
        )
