"""Resource limits of a remoting server: its config keys, connection admission, the budget of
buffered input bytes, and rate-limited refusal logs.

Every server (NameServer, Broker, Controller) bounds what one peer, or many, can make it hold:

- connections: at most ``serverMaxConnections`` in all and ``serverMaxConnectionsPerAddress``
  from one remote host (`ConnectionTable`); one over the cap is closed at once;
- time: a connection that neither reads nor writes for ``serverChannelMaxIdleTimeSeconds``
  (upstream's key and default, 120 s) is closed, and so is one holding a partly received frame
  for ``serverFrameReadTimeoutMillis``;
- bytes: a frame is at most frameMaxLength (16 MiB, `protocol.remoting`); the bytes read but not
  yet decoded, over all connections, are at most ``serverMaxBufferedInputBytes`` plus one
  16 KiB read per connection (`InputBudget`: a reader waits for budget instead of growing
  memory; a stalled partial frame holding budget is released by the read timeout, so waiting
  cannot deadlock; the first 16 KiB a connection holds are outside the budget, so a new
  connection's frame is read, and timed, even while an attack holds the budget); and a connection
  whose unsent output is above ``writeBufferHighWaterMark`` stops reading requests until it
  drains below ``writeBufferLowWaterMark`` (upstream's server turns Netty's autoRead off the
  same way).

The classes here are pure (time comes in as an argument) except `InputBudget`, which parks
waiting readers; `actors/kernel/remoting.py` applies them to connections.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs
import trio

from rocketrio.protocol.config import non_negative, positive
from rocketrio.protocol.remoting import DEFAULT_MAX_FRAME

READ_CHUNK = 16 * 1024  # the usual read; each connection may hold this much outside the budget
MAX_READ = 1024 * 1024  # the largest read, for a big frame
# the read after one that filled its buffer (a pipelining client has more waiting): one recv,
# one store turn and one answer write then carry ~4x the requests; taken from the input budget
# when it has room, else the read stays READ_CHUNK (never waits for budget for it)
BUSY_READ = 64 * 1024
# what writeBufferHighWaterMark / LowWaterMark = 0 mean (upstream: Netty's 64 KiB / 32 KiB; a
# rocketrio pull response alone may be 256 KiB, maxTransferBytesOnMessageInMemory)
DEFAULT_WRITE_HIGH_WATER = 1024 * 1024
MIN_INPUT_BUDGET = DEFAULT_MAX_FRAME + 4 + READ_CHUNK  # one whole frame can always be read


def _input_budget(_inst: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if value < MIN_INPUT_BUDGET:
        raise ValueError(
            f"{attribute.name} must be at least {MIN_INPUT_BUDGET} (one frameMaxLength frame "
            f"plus a read), got {value}"
        )


@attrs.define
class RemotingServerConfig:
    """The remoting server keys each server's config class inherits (one .conf file sets them
    with the rest, as upstream fills its NettyServerConfig from the same file).

    Upstream NettyServerConfig keys, same defaults: serverChannelMaxIdleTimeSeconds (0 turns
    the idle check off), writeBufferHighWaterMark / writeBufferLowWaterMark (0: 1 MiB / half
    the high mark). rocketrio's own (upstream has no such caps): serverMaxConnections,
    serverMaxConnectionsPerAddress, serverFrameReadTimeoutMillis, serverMaxBufferedInputBytes.
    """

    serverChannelMaxIdleTimeSeconds: int = attrs.field(default=120, validator=non_negative)
    writeBufferHighWaterMark: int = attrs.field(default=0, validator=non_negative)
    writeBufferLowWaterMark: int = attrs.field(default=0, validator=non_negative)
    serverMaxConnections: int = attrs.field(default=4096, validator=positive)
    serverMaxConnectionsPerAddress: int = attrs.field(default=1024, validator=positive)
    serverFrameReadTimeoutMillis: int = attrs.field(default=30_000, validator=positive)
    serverMaxBufferedInputBytes: int = attrs.field(
        default=256 * 1024 * 1024, validator=_input_budget
    )

    def __attrs_post_init__(self) -> None:
        self.server_limits()  # a low mark above the high mark is an error at start-up

    def server_limits(self) -> ServerLimits:
        high = self.writeBufferHighWaterMark or DEFAULT_WRITE_HIGH_WATER
        low = self.writeBufferLowWaterMark or high // 2
        if low > high:
            raise ValueError(
                f"writeBufferLowWaterMark ({low}) must not exceed writeBufferHighWaterMark ({high})"
            )
        idle = self.serverChannelMaxIdleTimeSeconds
        return ServerLimits(
            max_connections=self.serverMaxConnections,
            max_connections_per_address=self.serverMaxConnectionsPerAddress,
            idle_timeout_s=float(idle) if idle else None,
            read_timeout_s=self.serverFrameReadTimeoutMillis / 1000,
            input_budget_bytes=self.serverMaxBufferedInputBytes,
            write_high_water_bytes=high,
            write_low_water_bytes=low,
        )


@attrs.frozen
class ServerLimits:
    """The limits one `RemotingServer` applies (see the module docstring for each)."""

    max_connections: int = 4096
    max_connections_per_address: int = 1024
    idle_timeout_s: float | None = 120.0
    read_timeout_s: float = 30.0
    input_budget_bytes: int = 256 * 1024 * 1024
    write_high_water_bytes: int = DEFAULT_WRITE_HIGH_WATER
    write_low_water_bytes: int = DEFAULT_WRITE_HIGH_WATER // 2


# ---------------------------------------------------------------- connection admission


@attrs.frozen
class Refusal:
    """Why a connection was not admitted; ``reason`` is a short snake_case name."""

    reason: str
    remark: str


class ConnectionTable:
    """Open connections per remote host, against the total and per-address caps."""

    def __init__(self, max_total: int, max_per_address: int) -> None:
        self.max_total = max_total
        self.max_per_address = max_per_address
        self.total = 0
        self.by_address: dict[str, int] = {}

    def admit(self, address: str) -> Refusal | None:
        """Count a new connection from ``address``, or say why it is refused (not counted)."""
        if self.total >= self.max_total:
            return Refusal(
                "server_connection_limit",
                f"{self.total} connections open, serverMaxConnections={self.max_total}",
            )
        n = self.by_address.get(address, 0)
        if n >= self.max_per_address:
            return Refusal(
                "address_connection_limit",
                f"{n} connections open from {address}, "
                f"serverMaxConnectionsPerAddress={self.max_per_address}",
            )
        self.total += 1
        self.by_address[address] = n + 1
        return None

    def release(self, address: str) -> None:
        n = self.by_address[address] - 1
        self.total -= 1
        if n:
            self.by_address[address] = n
        else:
            del self.by_address[address]


# ---------------------------------------------------------------- rate-limited logs


class LogRateLimiter:
    """A token bucket for log lines: at most ``burst`` lines at once and ``per_s`` a second
    after that, so a flood of refusals cannot flood the log. `admit` returns the number of
    lines suppressed since the last admitted one (to put on the line), or None to stay quiet."""

    def __init__(self, per_s: float = 1.0, burst: int = 10) -> None:
        self.per_s = per_s
        self.burst = burst
        self._tokens = float(burst)
        self._at: float | None = None
        self.suppressed = 0

    def admit(self, now: float) -> int | None:
        if self._at is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.per_s)
        self._at = now
        if self._tokens < 1.0:
            self.suppressed += 1
            return None
        self._tokens -= 1.0
        dropped, self.suppressed = self.suppressed, 0
        return dropped


# ---------------------------------------------------------------- input bytes


class InputBudget:
    """Bytes of input a server's connections may hold between reads, over all of them.

    A reader takes budget before a read for what it may then hold (its partial frame plus the
    read) and gives back what it no longer holds. Waiters are served first come first served,
    so a reader that needs a big share is not starved by many small ones. ``peak`` is the most
    ever taken at once (never above ``total``).
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self.peak = 0
        self._waiters: deque[tuple[int, trio.Event]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def try_take(self, n: int) -> bool:
        """Take ``n`` bytes if they are free and nobody waits; the per-read fast path."""
        if self._waiters or self.used + n > self.total:
            return False
        self._grant(n)
        return True

    async def take(self, n: int) -> None:
        """Take ``n`` bytes, waiting (first come first served) until they are free."""
        if n > self.total:
            raise ValueError(f"cannot take {n} bytes of a {self.total}-byte input budget")
        if not self._waiters and self.used + n <= self.total:
            self._grant(n)
            return
        entry = (n, trio.Event())
        self._waiters.append(entry)
        try:
            await entry[1].wait()
        except BaseException:
            if entry[1].is_set():  # granted just as we were cancelled: hand it back
                self.give(n)
            else:
                self._waiters.remove(entry)
                self._wake()  # the next waiter may fit now that this one left the head
            raise

    def give(self, n: int) -> None:
        self.used -= n
        if self._waiters:
            self._wake()

    def _grant(self, n: int) -> None:
        self.used += n
        if self.used > self.peak:
            self.peak = self.used

    def _wake(self) -> None:
        waiters = self._waiters
        while waiters and self.used + waiters[0][0] <= self.total:
            n, event = waiters.popleft()
            self._grant(n)
            event.set()
