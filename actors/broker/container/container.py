"""The broker container: several brokers in one process, each supervised on its own
(upstream BrokerContainer; L1).

`BrokerContainer.run` starts the brokers of ``brokerConfigPaths`` in order, then serves its own
port (ADD_BROKER, REMOVE_BROKER, GET_BROKER_CONFIG, UPDATE_BROKER_CONFIG of its own keys:
handlers.py, live_config.py) until cancelled, then stops
every member gracefully. Each member runs in its own task (`_keep`) under its own cancel scope:
a member that raises, or stops on its own (a `crash`), is logged and restarted with backoff
(`RestartPolicy`, as `supervise` and `rocketrio up` do) and given up and removed after
``containerMaxRestarts`` failures in a row; the container and the other members keep running.
A member that fails to start at all is refused (ADD_BROKER answers the error; at start-up the
process fails, as upstream's exits).

Adds and removes are serialized (upstream's are ``synchronized``). The `ContainerRegistry` is
the pure table they keep: who is here, and each member's store writer, for an in-process escape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, assert_never, runtime_checkable

import attrs
import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.broker.container.config import (
    BrokerContainerConfig,
    join_config_paths,
    parse_config_paths,
)
from rocketrio.actors.broker.container.live_config import container_updater
from rocketrio.actors.broker.container.registry import (
    BrokerIdentity,
    ContainerError,
    ContainerRegistry,
    Member,
    UnknownBroker,
)
from rocketrio.actors.broker.dispatch.table import RequestTable, build_table
from rocketrio.actors.broker.failover.escape import LocalTarget
from rocketrio.actors.broker.store.messages import StoreWriter
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.kernel.live_update import ConfigChange
from rocketrio.actors.kernel.remoting import RemotingServer
from rocketrio.actors.kernel.restart_policy import GiveUp, Restart, RestartPolicy, RestartTracker
from rocketrio.actors.kernel.runtime import IoRunner
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import DataVersion
from rocketrio.protocol.config import ConfigError, dump_config, load_config


class MemberBroker(Protocol):
    """What the container needs of a broker (actors/broker/broker.py's `Broker`)."""

    async def run(self, *, task_status: Any = ...) -> None: ...

    def crash(self) -> None: ...

    @property
    def writer(self) -> StoreWriter: ...


@runtime_checkable
class EscapingMember(Protocol):
    """A member that takes part in the in-process escape (RIP-32, failover/escape.py): it
    escapes to the container's masters of other groups, and is one of them when master."""

    @property
    def escape_target(self) -> LocalTarget: ...

    def use_local_escape(self, masters: Callable[[], list[LocalTarget]]) -> None: ...


BrokerFactory = Callable[[BrokerConfig], MemberBroker]


def load_member_config(path: str, container: BrokerContainerConfig) -> BrokerConfig:
    """A member's config file; it persists live changes there, and a file without namesrvAddr
    uses the container's. A bad file is a ContainerError naming the key and file."""
    try:
        cfg = load_config(BrokerConfig, path)
    except ConfigError as e:
        raise ContainerError(str(e)) from None
    cfg.brokerConfigPath = cfg.brokerConfigPath or path
    cfg.namesrvAddr = cfg.namesrvAddr or container.namesrvAddr
    return cfg


@attrs.define
class _Slot:
    """One member's task: its current run's scope and whether a stop was asked."""

    identity: BrokerIdentity
    path: str
    config: BrokerConfig
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    stopping: bool = False
    done: trio.Event = attrs.field(factory=trio.Event)
    broker: MemberBroker | None = None
    started_at: float = 0.0  # trio time of the current run's start

    def stop(self) -> None:
        self.stopping = True
        self.scope.cancel()


class _Reported:
    """The task_status a member's runs report to: each start marks the member serving; the
    first is passed on to the add that waits for it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.done = False  # the first run reported started
        self.on_started: Callable[[], None] = lambda: None

    def started(self, value: Any = None) -> None:
        self.on_started()
        if not self.done:
            self.done = True
            self.inner.started(value)


class BrokerContainer:
    def __init__(
        self,
        config: BrokerContainerConfig,
        transport: Transport,
        make_broker: BrokerFactory,
        *,
        now_ms: Callable[[], int],
        config_path: str | None = None,
        run_blocking: IoRunner | None = None,
    ) -> None:
        self.config = config
        self.make_broker = make_broker
        self.now_ms = now_ms
        self.log = structlog.get_logger("container").bind(actor="container")
        self.registry = ContainerRegistry(config.listenPort)
        self.policy = self._restart_policy()
        self.version = DataVersion(timestamp=now_ms())
        self.updater = container_updater(
            config,
            config_path=config_path,
            apply=self._config_changed,
            log=self.log,
            run_blocking=run_blocking,
        )
        self._slots: dict[BrokerIdentity, _Slot] = {}
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        from rocketrio.actors.broker.container.handlers import container_handlers

        table = build_table([("container", container_handlers(self))])
        self.requests = RequestTable("container", table)
        self.server = RemotingServer(transport, config.addr, self.requests.process)
        self.addr = config.addr

    # ------------------------------------------------------------------ life

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        paths = parse_config_paths(self.config.brokerConfigPaths)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                for path in paths:
                    await self.add_broker(path)
                self.addr = await nursery.start(self.server.run)
                members = [m.identity.canonical_name for m in self.registry.members()]
                events.emit(self.log, events.ContainerStarted(addr=self.addr, members=members))
                task_status.started(self)
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    await self._stop_all()
                nursery.cancel_scope.cancel()

    async def _stop_all(self) -> None:
        slots = list(self._slots.values())
        for slot in slots:
            slot.stop()
        for slot in slots:
            await slot.done.wait()

    # ------------------------------------------------------------------ add / remove

    async def add_broker(self, path: str) -> Member:
        """Start the broker of config file ``path`` (ADD_BROKER); ContainerError if refused."""
        if not path:
            raise ContainerError("addBroker config path is empty")
        assert self._nursery is not None, "the container is not running"
        async with self._lock:
            config = load_member_config(path, self.config)
            identity = self.registry.check_add(config, path)
            slot = _Slot(identity, path, config)
            self._slots[identity] = slot
            try:
                await self._nursery.start(self._keep, slot)
            except Exception as e:
                self._slots.pop(identity, None)
                why = _leaf(e)
                raise ContainerError(
                    f"start broker {identity.canonical_name} failed: {type(why).__name__}: {why}"
                ) from e
            member = self.registry.get(identity)
            assert member is not None
            self._bump()
            events.emit(
                self.log,
                events.ContainerBrokerAdded(
                    member=identity.canonical_name,
                    addr=member.addr,
                    config_path=path,
                    is_master=member.is_master,
                ),
            )
            return member

    async def remove_broker(self, identity: BrokerIdentity) -> Member:
        """Stop a member gracefully and forget it (REMOVE_BROKER); UnknownBroker if absent."""
        async with self._lock:
            slot = self._slots.get(identity)
            member = self.registry.get(identity)
            if slot is None or member is None:
                raise UnknownBroker(f"broker {identity.canonical_name} is not in this container")
            slot.stop()
            await slot.done.wait()
            self._bump()
            events.emit(
                self.log,
                events.ContainerBrokerRemoved(member=identity.canonical_name, addr=member.addr),
            )
            return member

    def running(self, identity: BrokerIdentity) -> MemberBroker | None:
        """The member's broker of the current run (None when not in the container)."""
        slot = self._slots.get(identity)
        return None if slot is None else slot.broker

    def _bump(self) -> None:
        self.version = self.version.next_version(self.now_ms())

    def _restart_policy(self) -> RestartPolicy:
        c = self.config
        return RestartPolicy(
            0.5, 10.0, c.containerMaxRestarts, c.containerRestartStableMillis / 1000
        )

    def _config_changed(self, changes: tuple[ConfigChange, ...]) -> None:
        """UPDATE_BROKER_CONFIG applied (live_config.py): a new restart policy for every
        member's next failure; namesrvAddr is read by the next ADD_BROKER."""
        self.policy = self._restart_policy()
        if changes:
            self._bump()

    # ------------------------------------------------------------------ supervision

    async def _keep(self, slot: _Slot, *, task_status: trio.TaskStatus[Any]) -> None:
        """Run one member until asked to stop; restart it when it fails (module docstring)."""
        tracker = RestartTracker(self.policy)
        reported = _Reported(task_status)
        try:
            while not slot.stopping:
                error = await self._run_once(slot, reported)
                if error is None:
                    return
                delay = self._after_failure(slot, tracker, error)
                if delay is None:
                    return
                with trio.move_on_after(delay) as slot.scope:
                    await trio.sleep_forever()
        finally:
            self._slots.pop(slot.identity, None)
            if self.registry.get(slot.identity) is not None:
                self.registry.remove(slot.identity)
            slot.done.set()

    async def _run_once(self, slot: _Slot, reported: _Reported) -> str | None:
        """One run of the member: None when it stopped because asked, else what went wrong.
        A failure before the first start is raised (the add is refused)."""
        broker = slot.broker = self.make_broker(slot.config)
        if isinstance(broker, EscapingMember):
            broker.use_local_escape(self.escape_targets)
        booting = Member(slot.identity, slot.path, slot.config, broker.writer, serving=False)
        self.registry.add(booting)
        reported.on_started = lambda: self.registry.add(attrs.evolve(booting, serving=True))
        slot.scope = trio.CancelScope()
        if slot.stopping:
            return None
        slot.started_at = trio.current_time()
        try:
            with slot.scope:
                await broker.run(task_status=reported)
        except Exception as e:
            if not reported.done:
                raise
            why = _leaf(e)
            return f"{type(why).__name__}: {why}"
        if not reported.done:
            raise ContainerError("the broker stopped before it served")
        return None if slot.stopping else "stopped on its own (crashed)"

    def escape_targets(self) -> list[LocalTarget]:
        """The serving masters' escape entries, in the order they joined (upstream
        peekMasterBroker first): where an acting slave here writes what it hands on."""
        out: list[LocalTarget] = []
        for member in self.registry.members():
            slot = self._slots.get(member.identity)
            broker = None if slot is None else slot.broker
            if member.is_master and member.serving and isinstance(broker, EscapingMember):
                out.append(broker.escape_target)
        return out

    def _after_failure(self, slot: _Slot, tracker: RestartTracker, error: str) -> float | None:
        """Log a member's failure; the backoff before its restart, or None when given up."""
        if (member := self.registry.get(slot.identity)) is not None:
            self.registry.add(attrs.evolve(member, serving=False))  # no escape to it meanwhile
        ran = trio.current_time() - slot.started_at
        tracker.policy = self.policy  # the container's keys may have changed
        decision = tracker.on_exit(ran)
        name = slot.identity.canonical_name
        match decision:
            case GiveUp(restarts=restarts):
                failed = events.ContainerBrokerFailed(
                    member=name, error=error, restarting=False, restart=restarts
                )
                events.emit(self.log, failed)
                return None
            case Restart(delay_s=delay_s, restart=restart):
                failed = events.ContainerBrokerFailed(
                    member=name, error=error, restarting=True, restart=restart, backoff_s=delay_s
                )
                events.emit(self.log, failed)
                return delay_s
            case _:
                assert_never(decision)

    # ------------------------------------------------------------------ status

    def status_text(self) -> str:
        """GET_BROKER_CONFIG: the container's config as key=value lines, with
        ``brokerConfigPaths`` the files of the members now running, and one rocketrio line
        ``containerMembers`` (canonical name @ address, ';'-separated; ``(down)`` while a member
        boots or waits for its restart)."""
        current = attrs.evolve(
            self.config, brokerConfigPaths=join_config_paths(self.registry.config_paths())
        )
        members = ";".join(
            f"{m.identity.canonical_name}@{m.addr}{'' if m.serving else '(down)'}"
            for m in self.registry.members()
        )
        return dump_config(current) + f"containerMembers={members}\n"


def _leaf(exc: BaseException) -> BaseException:
    """The error inside the exception groups Trio's nurseries wrap it in (the first one)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class BrokerMember:
    """A `Broker` as the container runs it (its store writer is the put entry escape uses)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        await self.broker.run(task_status=task_status)

    def crash(self) -> None:
        self.broker.crash()

    @property
    def writer(self) -> StoreWriter:
        return self.broker.store.actor

    @property
    def escape_target(self) -> LocalTarget:
        return self.broker.escape_target

    def use_local_escape(self, masters: Callable[[], list[LocalTarget]]) -> None:
        self.broker.use_local_escape(masters)


def broker_factory(transport: Transport, **broker_kw: Any) -> BrokerFactory:
    """Members as real `Broker`s on ``transport`` (``broker_kw``: the Broker's injections)."""

    def make(config: BrokerConfig) -> MemberBroker:
        return BrokerMember(Broker(config, transport, **broker_kw))

    return make


async def run_container(
    config: BrokerContainerConfig,
    transport: Transport,
    *,
    config_path: str | None = None,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
) -> None:
    """`rocketrio container`: serve until cancelled; ``task_status.started(container)``.
    ``config_path``: its config file, where UPDATE_BROKER_CONFIG persists."""
    container = BrokerContainer(
        config, transport, broker_factory(transport), now_ms=wallclock_ms, config_path=config_path
    )
    await container.run(task_status=task_status)
