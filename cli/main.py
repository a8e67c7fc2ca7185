"""`rocketrio`: the one launcher. Subcommands start a role or run a tool.

    rocketrio namesrv [-c namesrv.conf] [-p 9876]
    rocketrio broker -c broker.conf [-n "127.0.0.1:9876;..."] [--enable-proxy]
    rocketrio container -c container.conf [-b a.conf:b.conf] [-n NAMESRV]
    rocketrio controller -c controller.conf
    rocketrio proxy -n NAMESRV [--grpc-port 8081] [--host HOST]
    rocketrio up [--mode single|2m-noslave] [--dir DIR]
    rocketrio admin <command> ...
    rocketrio produce / consume ...
    rocketrio analyze LOGDIR... [--out DIR] [--master URL]
    rocketrio console -n NAMESRV [--controller ADDR] [--listen HOST:PORT] [--token-file F]

Role processes run under `run_service`: logging configured, SIGINT/SIGTERM cancel the service so
it shuts down gracefully (data flushed, unregistered), and a config error exits with status 2 and
a message naming the key and the file. A role that fails to start (its store is damaged or locked
by another broker, its port is taken, ...) logs an ERROR line ``startup_failed`` (role, error,
traceback) in its JSON log, prints one line on stderr and exits with status 1; a role that fails
later logs ``process_failed`` the same way. A broker (or a container of brokers) that serves
gets the server GC policy (actors/kernel/gc_policy.py: the boot heap frozen, a higher young
threshold).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import structlog
import trio

from rocketrio.actors.kernel import gc_policy
from rocketrio.actors.observe import events
from rocketrio.actors.observe.logs import configure_logging
from rocketrio.cli.extras import missing_extra
from rocketrio.cli.parent_death import SupervisorGone, bind_to_supervisor
from rocketrio.protocol.config import ConfigError, load_config

GC_TUNED_ROLES = frozenset({"broker", "container"})  # the roles that get gc_policy's settings


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in getattr(args, "set", None) or []:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _leaf(exc: BaseException) -> BaseException:
    """The error inside the exception groups Trio's nurseries wrap it in (the first one)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def run_service(
    name: str,
    role: str,
    log_dir: str,
    service: Callable[..., Awaitable[Any]],
    *args: Any,
) -> int:
    """Run one role until SIGINT/SIGTERM; returns the process exit status (module docstring).

    ``service`` takes ``task_status`` and calls ``task_status.started()`` once it serves."""
    try:
        bind_to_supervisor()  # under `rocketrio up`: die with it, whatever kills it
    except SupervisorGone as e:
        print(f"rocketrio {role}: {e}", file=sys.stderr)
        return 1
    configure_logging(name, role, log_dir)
    log = structlog.get_logger("launcher")
    started = False

    async def main() -> None:
        nonlocal started
        async with trio.open_nursery() as nursery:

            async def watch_signals() -> None:
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as sigs:
                    async for sig in sigs:
                        events.emit(log, events.ProcessShutdown(reason=signal.Signals(sig).name))
                        nursery.cancel_scope.cancel()
                        return

            async def serve(*, task_status: trio.TaskStatus[Any]) -> None:
                await service(*args, task_status=task_status)
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch_signals)
            await nursery.start(serve)
            started = True
            if role in GC_TUNED_ROLES:
                gc_policy.tune_server_gc()  # once the boot's heap is made (gc_policy.py)

    try:
        trio.run(main)
    except Exception as e:
        leaf = _leaf(e)
        error = f"{type(leaf).__name__}: {leaf}"
        record = events.ProcessFailed if started else events.StartupFailed
        events.emit(
            log,
            record(error=error, traceback="".join(traceback.format_exception(leaf)).rstrip()),
        )
        what = "failed" if started else "start-up failed"
        print(f"rocketrio {role} {name}: {what}: {error}", file=sys.stderr)
        return 1
    return 0


def cmd_namesrv(args: argparse.Namespace) -> int:
    from rocketrio.actors.controller.embedded import (
        load_namesrv_configs,
        run_namesrv_with_controller,
    )
    from rocketrio.actors.kernel.transport import TcpTransport
    from rocketrio.actors.namesrv.namesrv import run_namesrv

    ov = _overrides(args)
    if args.port:
        ov["listenPort"] = str(args.port)
    # one namesrv.conf carries the controller keys too (enableControllerInNamesrv=true)
    cfg, controller_cfg = load_namesrv_configs(args.config, ov)
    if args.config:  # UPDATE_*_CONFIG persist into the file started with (upstream namesrv)
        cfg.configStorePath = cfg.configStorePath or args.config
        if controller_cfg is not None:
            controller_cfg.configStorePath = controller_cfg.configStorePath or args.config
    name = args.name or f"namesrv-{cfg.listenPort}"
    if controller_cfg is not None:
        return run_service(
            name,
            "namesrv",
            cfg.logDir,
            run_namesrv_with_controller,
            cfg,
            controller_cfg,
            TcpTransport(),
        )
    return run_service(name, "namesrv", cfg.logDir, run_namesrv, cfg, TcpTransport())


def cmd_broker(args: argparse.Namespace) -> int:
    from rocketrio.actors.broker.broker import run_broker
    from rocketrio.actors.kernel.transport import TcpTransport

    cfg = broker_config(args)
    name = args.name or f"{cfg.brokerName}-{cfg.listenPort}"
    if cfg.enableProxy:  # local mode: the gRPC proxy runs in this process
        if (missing := missing_extra("proxy", "rocketrio broker --enable-proxy")) is not None:
            print(missing, file=sys.stderr)
            return 1
        from rocketrio.actors.proxy.grpc_env import prepare_grpc_environment

        prepare_grpc_environment()  # before grpcio loads (grpc_env.py)
        from rocketrio.actors.proxy.local import run_broker_with_proxy

        return run_service(name, "broker", cfg.logDir, run_broker_with_proxy, cfg, TcpTransport())
    return run_service(name, "broker", cfg.logDir, run_broker, cfg, TcpTransport())


def cmd_container(args: argparse.Namespace) -> int:
    from rocketrio.actors.broker.container.container import run_container
    from rocketrio.actors.kernel.transport import TcpTransport

    cfg = container_config(args)
    name = args.name or f"container-{cfg.listenPort}"
    run = partial(run_container, config_path=args.config or None)
    return run_service(name, "container", cfg.logDir, run, cfg, TcpTransport())


def container_config(args: argparse.Namespace) -> Any:
    """The BrokerContainerConfig of `rocketrio container` (its file, then --set, -n, -b); a
    bad brokerConfigPaths is a ConfigError before anything starts."""
    from rocketrio.actors.broker.container.config import (
        BrokerContainerConfig,
        join_config_paths,
        parse_config_paths,
    )
    from rocketrio.actors.broker.container.container import load_member_config
    from rocketrio.actors.broker.container.registry import ContainerError

    ov = _overrides(args)
    if args.namesrv:
        ov["namesrvAddr"] = args.namesrv
    if args.broker_configs:
        ov["brokerConfigPaths"] = args.broker_configs
    cfg = load_config(BrokerContainerConfig, args.config, ov)
    where = f"{args.config or '<command line>'}: brokerConfigPaths"
    paths = parse_config_paths(cfg.brokerConfigPaths, where)
    if args.config and not args.broker_configs:  # the file's own list: relative to its folder
        folder = os.path.dirname(os.path.abspath(args.config))
        paths = [os.path.join(folder, p) for p in paths]
        cfg.brokerConfigPaths = join_config_paths(paths)
    for path in paths:  # a bad broker file is a config error before anything starts
        try:
            load_member_config(path, cfg)
        except ContainerError as e:
            raise ConfigError(str(e)) from None
    return cfg


def broker_config(args: argparse.Namespace) -> Any:
    """The BrokerConfig of `rocketrio broker` (its file, then --set, -n, --enable-proxy)."""
    from rocketrio.actors.broker.boot.config import BrokerConfig

    ov = _overrides(args)
    if args.namesrv:
        ov["namesrvAddr"] = args.namesrv
    if getattr(args, "enable_proxy", False):
        ov["enableProxy"] = "true"
    cfg = load_config(BrokerConfig, args.config, ov)
    if args.config and not cfg.brokerConfigPath:
        cfg.brokerConfigPath = args.config  # UPDATE_BROKER_CONFIG persists here (upstream)
    if cfg.enableProxy and not cfg.namesrvAddr:
        where = args.config or "<command line>"
        raise ConfigError(f"{where}: enableProxy needs namesrvAddr (the proxy's routes)")
    return cfg


def cmd_controller(args: argparse.Namespace) -> int:
    from rocketrio.actors.controller.config import ControllerConfig
    from rocketrio.actors.controller.controller import run_controller
    from rocketrio.actors.kernel.transport import TcpTransport

    cfg = load_config(ControllerConfig, args.config, _overrides(args))
    if args.config and not cfg.configStorePath:
        # UPDATE_CONTROLLER_CONFIG persists into the file started with, so a restart keeps it
        # (upstream's default, ~/controller/controller.properties, is not read at start)
        cfg.configStorePath = args.config
    try:
        cfg.to_raft_config()  # a bad controllerDLeger* key is a config error, not a traceback
    except ValueError as e:
        raise ConfigError(f"{args.config or '<command line>'}: {e}") from None
    name = args.name or f"controller-{cfg.controllerDLegerSelfId}"
    return run_service(name, "controller", cfg.logDir, run_controller, cfg, TcpTransport())


def cmd_proxy(args: argparse.Namespace) -> int:
    if (missing := missing_extra("proxy", "rocketrio proxy")) is not None:
        print(missing, file=sys.stderr)
        return 1
    from rocketrio.actors.proxy.grpc_env import prepare_grpc_environment

    prepare_grpc_environment()  # before grpcio loads (grpc_env.py)
    from rocketrio.actors.proxy.proxy import run_proxy

    cfg, log_dir = proxy_config(args)
    name = args.name or f"proxy-{cfg.grpc_port}"
    return run_service(name, "proxy", log_dir, run_proxy, cfg)


# the keys of a cluster-mode proxy's config file (upstream's ProxyConfig names)
PROXY_KEYS = frozenset(
    {
        "namesrvAddr",
        "grpcServerPort",
        "proxyHost",
        "proxyMode",
        "logDir",
        "authenticationEnabled",
        "innerClientAuthenticationCredentials",
        "rocketMQClusterName",
    }
)


def proxy_config(args: argparse.Namespace) -> tuple[Any, str]:
    """The ProxyConfig and log directory of `rocketrio proxy` (its file, then the flags).
    An unknown key, a bad value or proxyMode=local (which runs inside a broker:
    `rocketrio broker --enable-proxy`) is a ConfigError naming the key and file."""
    from rocketrio.actors.auth.config import parse_credentials
    from rocketrio.actors.proxy.renew import CONFIG_KEYS, renew_config_of
    from rocketrio.actors.proxy.service import ProxyConfig

    source = args.config or "<command line>"
    conf = load_proxy_config(args.config) if args.config else {}
    unknown = sorted(set(conf) - PROXY_KEYS - set(CONFIG_KEYS) - {"enableProxyAutoRenew"})
    if unknown:
        raise ConfigError(f"{source}: unknown proxy key(s) {', '.join(unknown)}")
    mode = conf.get("proxyMode", "cluster").lower()
    if mode != "cluster":
        raise ConfigError(
            f"{source}: proxyMode={conf['proxyMode']}: `rocketrio proxy` runs cluster mode; "
            "local mode runs inside a broker (rocketrio broker --enable-proxy)"
        )
    namesrv = args.namesrv or conf.get("namesrvAddr")
    if not namesrv:
        raise ConfigError("the proxy needs -n NAMESRV (or namesrvAddr in its config)")
    port_text = conf.get("grpcServerPort", "8081")
    if not port_text.isdigit() or int(port_text) > 65535:
        raise ConfigError(f"{source}: grpcServerPort must be a port number, got {port_text!r}")
    auth = conf.get("authenticationEnabled", "false").lower()
    if auth not in ("true", "false"):
        raise ConfigError(f"{source}: authenticationEnabled must be true or false, got {auth!r}")
    cluster = conf.get("rocketMQClusterName", "DefaultCluster").strip()
    if not cluster:
        raise ConfigError(f"{source}: rocketMQClusterName must name the brokers' cluster")
    cfg = ProxyConfig(
        namesrv_addr=namesrv,
        grpc_port=args.grpc_port or int(port_text),
        host=args.host or conf.get("proxyHost", ""),
        authentication_enabled=auth == "true",
        rocketmq_cluster_name=cluster,
    )
    try:
        creds = parse_credentials(conf.get("innerClientAuthenticationCredentials", ""))
        cfg.renew = renew_config_of(conf)
    except ValueError as e:
        raise ConfigError(f"{source}: {e}") from None
    if creds is not None:
        cfg.access_key, cfg.secret_key = creds.access_key, creds.secret_key
    return cfg, conf.get("logDir", args.log_dir)


def load_proxy_config(path: str) -> dict[str, str]:
    """The proxy's key=value file (namesrvAddr, grpcServerPort, proxyHost, proxyMode, logDir,
    authenticationEnabled, innerClientAuthenticationCredentials, rocketMQClusterName, and the
    auto-renew keys of renew.CONFIG_KEYS and enableProxyAutoRenew: upstream's names)."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
    return out


# The server roles, and the module that adds each tool command's parser. A process parses its
# arguments with the roles' parsers and its own command's only (`build_parser`): importing
# every tool module costs about 0.8 s of CPU, paid by every broker, NameServer and controller
# `up` and the system tests start and by every admin, produce and consume call.
ROLES = frozenset({"namesrv", "controller", "broker", "container", "proxy"})
TOOL_MODULES = {
    "up": "rocketrio.cli.up",
    "chaos": "rocketrio.cli.chaos.command",
    "console": "rocketrio.cli.console",
    "admin": "rocketrio.cli.admin",
    "produce": "rocketrio.cli.tools",
    "consume": "rocketrio.cli.tools",
    "analyze": "rocketrio.cli.analyze",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The launcher's parser: every subcommand, or, for ``command`` (a role or a tool command),
    the roles' and that command's only."""
    p = argparse.ArgumentParser(prog="rocketrio", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def role_parser(name: str, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("-c", "--config", help="key=value config file (upstream key names)")
        sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
        sp.add_argument("--name", help="node name used in logs (default derived from the config)")
        return sp

    sp = role_parser("namesrv", "start a NameServer")
    sp.add_argument("-p", "--port", type=int, help="listen port (listenPort)")
    sp.set_defaults(func=cmd_namesrv)

    sp = role_parser("controller", "start a standalone controller replica")
    sp.set_defaults(func=cmd_controller)

    sp = role_parser("broker", "start a Broker")
    sp.add_argument("-n", "--namesrv", help='name servers, "host:port;host:port" (namesrvAddr)')
    sp.add_argument(
        "--enable-proxy",
        action="store_true",
        help="local mode: run the gRPC proxy in this process (enableProxy; grpcServerPort 8081)",
    )
    sp.set_defaults(func=cmd_broker)

    sp = role_parser("container", "start a broker container: several brokers in one process")
    sp.add_argument("-n", "--namesrv", help="name servers of brokers whose file names none")
    sp.add_argument(
        "-b",
        "--broker-configs",
        help="broker config files, ':'-separated (brokerConfigPaths; upstream -b)",
    )
    sp.set_defaults(func=cmd_container)

    sp = sub.add_parser("proxy", help="start a gRPC proxy (RocketMQ 5 SDKs) in cluster mode")
    sp.add_argument("-c", "--config", help="key=value file: namesrvAddr, grpcServerPort, ...")
    sp.add_argument("-n", "--namesrv", help='name servers, "host:port;..." (namesrvAddr)')
    sp.add_argument("--grpc-port", type=int, help="gRPC listen port (grpcServerPort, 8081)")
    sp.add_argument("--host", help="address given to clients in routes (default: this host)")
    sp.add_argument("--name", help="node name used in logs (default proxy-<port>)")
    sp.add_argument("--log-dir", default="logs", help="directory of the JSON log (logs)")
    sp.set_defaults(func=cmd_proxy)
    if command in ROLES:
        return p
    names = [TOOL_MODULES[command]] if command in TOOL_MODULES else list(TOOL_MODULES.values())
    for name in dict.fromkeys(names):  # in the order of `TOOL_MODULES`, each once
        importlib.import_module(name).add_parser(sub)
    return p


async def main_async(argv: list[str], wiring: Any) -> int:
    """Run a tool command (admin, produce, consume) inside the caller's Trio loop, its clients
    wired by ``wiring`` (a `rocketrio.cli.failure.Wiring`): the in-process tests' entry.
    Usage errors raise SystemExit(2) as from `main`."""
    from rocketrio.cli.failure import run_tool_async

    args = build_parser().parse_args(argv)
    if not hasattr(args, "run"):
        raise ValueError(f"{args.command} is not a tool command")
    return await run_tool_async(args.tool, args.run, args, wiring)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ConfigError as e:
        print(f"rocketrio: config error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
