"""The controller embedded in a NameServer process (enableControllerInNamesrv=true).

Embedded mode (`run_namesrv_with_controller`): the NameServer process runs a Controller beside
it, never in the path of route queries; the controller keys come from the same namesrv.conf
(upstream's layout), see `load_namesrv_configs`. `attach_to_namesrv` feeds the NameServer's
broker heartbeats and connection closes to the controller. Brokers also heartbeat every
controller address directly (controllerAddr), so each embedded replica's table is fed by two
paths: its own port (every broker, by identity) and its NameServer (slaves by identity, a
master, which heartbeats NameServers as brokerId 0, by address); the death checks between
replicas (failover.py) read that table.
"""

from __future__ import annotations

import random

import attrs
import trio

from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.controller import Controller
from rocketrio.actors.kernel.remoting import Connection, Processor, RequestContext
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import NameServer
from rocketrio.actors.raft.node import IoRunner
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.config import ConfigError, load_config
from rocketrio.protocol.controller_headers import BrokerHeartbeatRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext
from rocketrio.storage.fs import OS_FS, FileSystem


def attach_to_namesrv(controller: Controller, namesrv: NameServer) -> None:
    """Feed the NameServer's broker heartbeats and broker connection closes to `controller`.

    The NameServer keeps answering BROKER_HEARTBEAT itself (its own liveness table is
    untouched); the controller only observes, so route queries never wait on it.
    """
    own: dict[int, Processor] = {}

    async def heartbeat(ctx: RequestContext) -> RemotingCommand | None:
        try:
            h = from_ext(BrokerHeartbeatRequestHeader, ctx.cmd.ext_fields)
        except HeaderError:
            h = None  # the NameServer's own handler answers the malformed request
        if h is not None:
            # the connection tells the controller at once when this broker's process dies
            controller.remember_broker_addr(ctx.conn, h.brokerAddr)
            # towards the NameServer a master heartbeats as brokerId 0 (its role id), which is
            # no controller id (those start at 1): only slaves' heartbeats name their identity;
            # a master's still refreshes the entry at its address (what this path can tell)
            controller.observe_heartbeat(h)
        return await own[RequestCode.BROKER_HEARTBEAT](ctx)

    own.update(namesrv.register_processor([RequestCode.BROKER_HEARTBEAT], heartbeat))
    previous = namesrv.server.on_connect

    def on_connect(conn: Connection) -> None:
        if previous is not None:
            previous(conn)
        controller.watch(conn)

    namesrv.server.on_connect = on_connect


def _field_names(cls: type) -> frozenset[str]:
    return frozenset(a.name for a in attrs.fields(cls))


def load_namesrv_configs(
    path: str | None, overrides: dict[str, str] | None = None
) -> tuple[NamesrvConfig, ControllerConfig | None]:
    """namesrv.conf -> (NamesrvConfig, ControllerConfig if enableControllerInNamesrv).

    As upstream, one file carries both key sets; each class ignores the other's keys, and an
    unknown key (in neither) is still an error naming the key and the file.
    """
    ns_keys, ctrl_keys = _field_names(NamesrvConfig), _field_names(ControllerConfig)
    ns = load_config(NamesrvConfig, path, overrides, ignore_unknown=ctrl_keys - ns_keys)
    if not ns.enableControllerInNamesrv:
        return ns, None
    ctrl = load_config(ControllerConfig, path, overrides, ignore_unknown=ns_keys - ctrl_keys)
    try:
        ctrl.to_raft_config()  # a bad controllerDLeger* key fails at start-up, naming the key
    except ValueError as e:
        raise ConfigError(f"{path or '<command line>'}: {e}") from None
    return ns, ctrl


async def run_namesrv_with_controller(
    namesrv_config: NamesrvConfig,
    controller_config: ControllerConfig,
    transport: Transport,
    *,
    rng: random.Random | None = None,
    io_runner: IoRunner | None = None,
    fs: FileSystem = OS_FS,
    task_status: trio.TaskStatus[tuple[NameServer, Controller]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """A NameServer with an embedded controller (enableControllerInNamesrv=true).

    The NameServer starts first and serves routes whatever the controller group does; the
    controller listens on its own Raft peer address, like upstream's DLedger controller.
    `rng` / `io_runner` / `fs` are for simulations (see `Controller`).
    """
    namesrv = NameServer(namesrv_config, transport, fs=fs, io_runner=io_runner)
    # one namesrv.conf, one metrics port: the NameServer's endpoint serves both
    controller = Controller(
        controller_config, transport, rng=rng, io_runner=io_runner, fs=fs, export_metrics=False
    )
    if namesrv.rpc_latency is not None and controller.rpc_latency is not None:
        namesrv.add_metrics(controller.rpc_source(), controller.metrics_collectors())
    attach_to_namesrv(controller, namesrv)
    async with trio.open_nursery() as nursery:
        await nursery.start(namesrv.run)
        await nursery.start(controller.run)
        task_status.started((namesrv, controller))
