"""The processes of the whole-cluster simulation (cluster_sim.py): one per simulated host.

Owns how a process lives and dies on the simulated network and its host's simulated disk:

- `Host`: an address on the `SimNetwork`, its `SimFileSystem` (what survives the process) and a
  seeded `SlowDisk` that can be switched on (the broker's ``run_blocking`` and the Raft node's
  ``io_runner`` go through it, so flushes and Raft fsyncs take simulated time);
- `ProcFS`: one process incarnation's view of its host's disk. Every file call goes to the disk
  until the process is killed; from then on every call raises `ProcessKilled`, so the cleanup
  code of a killed process (finally blocks running under cancellation) cannot make anything
  durable that a real kill -9 would have lost;
- `Process`: one incarnation at a time, run in its own cancel scope. `kill` is kill -9 (the disk
  keeps its page cache) or, with ``machine=True``, a power cut of the host (the disk keeps only
  what was fsynced, plus a random prefix of the rest, the last write maybe torn). A process that
  dies on its own is examined: an injected fsync failure (`SimFileSystem.fail_fsync`) is an
  expected death (the product must die and restart after a failed fsync); anything else is a
  product error the checker reports;
- `BrokerProc`, `ControlProc` (a NameServer, with an embedded controller or not) and
  `ControllerProc` (a standalone controller): the real production classes wired with the
  injected transport, disk, clocks and seeded randomness.
"""

from __future__ import annotations

import abc
import errno
import random
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.controller import Controller
from rocketrio.actors.controller.embedded import attach_to_namesrv
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import NameServer
from tests.harness.clock import now_ms
from tests.harness.sim_disk import FILE_CALLS, SimFileSystem
from tests.harness.sim_network import SimNetwork

RAFT_TICK_MS = 50  # the Raft node's tick: its timers (200 ms heartbeats) need no finer grain


class ProcessKilled(Exception):
    """A file call of a process that was already killed (its cleanup code ran too late)."""


class _ProcFSBase:
    def __init__(self, disk: SimFileSystem, name: str) -> None:
        self.disk = disk
        self.name = name
        self.dead = False


def _forward(call: str) -> Callable[..., Any]:
    def method(self: _ProcFSBase, *args: Any, **kwargs: Any) -> Any:
        if self.dead:
            raise ProcessKilled(f"{self.name}: {call} after the process was killed")
        return getattr(self.disk, call)(*args, **kwargs)

    method.__name__ = call
    return method


ProcFS = type("ProcFS", (_ProcFSBase,), {call: _forward(call) for call in FILE_CALLS})
ProcFS.__doc__ = "A process incarnation's view of its host's disk: dead after the kill."


class SlowDisk:
    """Seeded storage latency, off until set: ``slow`` is 0.5-8 ms per call (a slow SSD),
    ``stalled`` 50-400 ms (a disk hiccup: writers pile up behind one fsync)."""

    LEVELS = {"slow": (0.0005, 0.008), "stalled": (0.05, 0.4)}

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.level: str | None = None

    @property
    def on(self) -> bool:
        return self.level is not None

    async def run_blocking(self, fn: Callable[[], Any]) -> Any:
        if self.level is not None:
            await trio.sleep(self.rng.uniform(*self.LEVELS[self.level]))
        else:
            await trio.lowlevel.checkpoint()
        return fn()

    async def io_runner(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.level is not None:
            await trio.sleep(self.rng.uniform(*self.LEVELS[self.level]))
        return fn(*args)


@attrs.define
class Host:
    ip: str
    disk: SimFileSystem
    slow: SlowDisk


def injected_fsync_failure(exc: BaseException) -> bool:
    """Is ``exc`` (or every leaf of its group) an fsync failure the simulation injected?"""
    if isinstance(exc, BaseExceptionGroup):
        return all(injected_fsync_failure(e) for e in exc.exceptions)
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:  # also through `raise X from fsync_error`
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno == errno.EIO and "simulated fsync" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def leaf_errors(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaf_errors(sub)]
    return [exc]


class Process(abc.ABC):
    """One process on a host, one incarnation at a time (see module docstring)."""

    def __init__(self, name: str, host: Host, net: SimNetwork, nursery: trio.Nursery) -> None:
        self.name = name
        self.host = host
        self.net = net
        self.nursery = nursery
        self.incarnation = 0
        self.up = False
        self.fs: Any = None
        self.errors: list[str] = []  # unexpected deaths: product errors
        self.deaths: list[str] = []  # expected deaths (injected fsync failures)
        self._scope: trio.CancelScope | None = None
        self._done: trio.Event | None = None

    role = "process"  # the ``role`` of its log lines

    @abc.abstractmethod
    def _build(self, fs: Any) -> Callable[[], Awaitable[None]]:
        """The process's main: build the product objects on ``fs``; run until cancelled."""

    async def start(self) -> None:
        if self._done is not None:
            await self._done.wait()
        self.incarnation += 1
        self.fs = ProcFS(self.host.disk, f"{self.name}#{self.incarnation}")
        self._scope, self._done = trio.CancelScope(), trio.Event()
        self.up = True
        main = self._build(self.fs)
        self.nursery.start_soon(self._main, main, self.fs, self._scope, self._done)

    async def _main(
        self,
        main: Callable[[], Awaitable[None]],
        fs: Any,
        scope: trio.CancelScope,
        done: trio.Event,
    ) -> None:
        try:
            # every line this process's tasks log names it (the JSON logs of the run)
            with scope, structlog.contextvars.bound_contextvars(node=self.name, role=self.role):
                await main()
            if not fs.dead:
                self.errors.append(f"{self.name}#{self.incarnation} returned on its own")
        except Exception as e:
            if not fs.dead:  # it died on its own, not by our kill
                if injected_fsync_failure(e):
                    self.deaths.append(f"{self.name}#{self.incarnation}: fsync failed")
                else:
                    leaves = "; ".join(f"{type(x).__name__}: {x}" for x in leaf_errors(e))
                    self.errors.append(f"{self.name}#{self.incarnation} died: {leaves}")
        finally:
            if self.up and self.fs is fs:  # not ended by `kill`: died (or a power cut hook)
                self._after_death(machine=False)
            done.set()

    def _after_death(self, *, machine: bool, lose_unsynced: bool = False) -> None:
        self.up = False
        if self.fs is not None:
            self.fs.dead = True
        self.net.crash(self.host.ip)
        if machine:
            self.host.disk.crash(lose_unsynced=lose_unsynced)
        else:
            self.host.disk.crash(keep_unsynced=True)

    async def kill(self, *, machine: bool = False, lose_unsynced: bool = False) -> None:
        """kill -9 (the page cache survives), or a power cut of the host (``machine``)."""
        if not self.up:
            return
        self.fs.dead = True
        self.up = False
        self.net.crash(self.host.ip)
        self._on_kill()
        assert self._scope is not None and self._done is not None
        self._scope.cancel()
        await self._done.wait()
        self._after_death(machine=machine, lose_unsynced=lose_unsynced)

    def _on_kill(self) -> None:  # noqa: B027 (an optional hook: most processes need nothing)
        """Product-specific kill -9 (no graceful shutdown)."""


class BrokerProc(Process):
    """A controller-mode broker; ``tap`` instruments each new `Broker` (the ack tap)."""

    role = "broker"

    def __init__(
        self,
        name: str,
        host: Host,
        net: SimNetwork,
        nursery: trio.Nursery,
        *,
        config: Callable[[], BrokerConfig],
        rng: random.Random,
        tap: Callable[[BrokerProc, Broker], None],
        set_name: str,
    ) -> None:
        super().__init__(name, host, net, nursery)
        self.config = config
        self.rng = rng
        self.tap = tap
        self.set_name = set_name
        self.broker: Broker | None = None

    @property
    def addr(self) -> str:
        return f"{self.host.ip}:10911"

    def _build(self, fs: Any) -> Callable[[], Awaitable[None]]:
        broker = Broker(
            self.config(),
            self.net.transport(self.host.ip),
            now_ms=now_ms,
            rng=random.Random(self.rng.getrandbits(32)),
            run_blocking=self.host.slow.run_blocking,
            fs=fs,
        )
        self.broker = broker
        self.tap(self, broker)
        return broker.run

    def _on_kill(self) -> None:
        if self.broker is not None:
            self.broker.crash()

    @property
    def live_broker(self) -> Broker | None:
        return self.broker if self.up else None


class ControlProc(Process):
    """A NameServer, with its embedded controller when ``controller`` config is given."""

    role = "namesrv"

    def __init__(
        self,
        name: str,
        host: Host,
        net: SimNetwork,
        nursery: trio.Nursery,
        *,
        namesrv: NamesrvConfig | None,
        controller: ControllerConfig | None,
        rng: random.Random,
    ) -> None:
        super().__init__(name, host, net, nursery)
        self.namesrv_config = namesrv
        self.controller_config = controller
        self.role = "namesrv" if namesrv is not None else "controller"
        self.rng = rng
        self.namesrv: NameServer | None = None
        self.controller: Controller | None = None

    def _build(self, fs: Any) -> Callable[[], Awaitable[None]]:
        transport = self.net.transport(self.host.ip)
        ns = ctrl = None
        if self.namesrv_config is not None:
            ns = NameServer(self.namesrv_config, transport, fs=fs)
        if self.controller_config is not None:
            ctrl = Controller(
                self.controller_config,
                transport,
                rng=random.Random(self.rng.getrandbits(32)),
                io_runner=self.host.slow.io_runner,
                fs=fs,
            )
            ctrl.node.tick_ms = RAFT_TICK_MS
            if ns is not None:
                attach_to_namesrv(ctrl, ns)
        self.namesrv, self.controller = ns, ctrl

        async def main() -> None:
            async with trio.open_nursery() as n:
                if ns is not None:
                    await n.start(ns.run)
                if ctrl is not None:
                    await n.start(ctrl.run)

        return main

    @property
    def live_controller(self) -> Controller | None:
        return self.controller if self.up else None
