"""``rocketrio console``: the live web console of a cluster.

    rocketrio console -n 127.0.0.1:9876 [--controller 127.0.0.1:9878]
                      [--listen 127.0.0.1:8080] [--token-file FILE] [--allow-origin URL]

It binds 127.0.0.1 unless ``--listen`` names another address. Without ``--token-file`` the
console is read-only; with it, the page's actions (topics, groups, offsets, electMaster,
cleanBrokerMetadata) need the file's token. It prints its URL once it serves.
"""

from __future__ import annotations

import argparse
from typing import Any

import trio

from rocketrio.protocol.config import ConfigError


def _listen(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"--listen expects host:port, got {value!r}")
    return value


def _interval(value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--interval expects seconds, got {value!r}") from None
    if not 0.1 <= v <= 60:
        raise argparse.ArgumentTypeError(f"--interval must be 0.1..60 s, got {value}")
    return v


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "console",
        help="serve the live web console of a cluster",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("-n", "--namesrv", required=True, help='name servers, "host:port;host:port"')
    p.add_argument("--controller", default="", help='controller replicas, "host:port;..."')
    p.add_argument("--listen", type=_listen, default="127.0.0.1:8080", help="host:port to serve")
    p.add_argument("--token-file", help="file holding the token that actions need")
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="URL",
        help="another page origin allowed to open the websocket (e.g. http://ops.example:80)",
    )
    p.add_argument("--interval", type=_interval, default=0.5, help="poll interval in seconds")
    p.add_argument("--log-dir", default="", help="where the JSON log goes (default: stderr)")
    p.set_defaults(func=cmd_console)


def cmd_console(args: argparse.Namespace) -> int:
    from rocketrio.actors.console.actions import load_token
    from rocketrio.actors.console.service import ConsoleOptions, run_console
    from rocketrio.actors.kernel.transport import TcpTransport
    from rocketrio.cli.main import run_service

    token = None
    if args.token_file:
        try:
            token = load_token(args.token_file)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    opts = ConsoleOptions(
        namesrv=args.namesrv,
        controller=args.controller,
        listen=args.listen,
        token=token,
        interval_s=args.interval,
        allowed_origins=frozenset(args.allow_origin),
    )

    async def serve(*, task_status: trio.TaskStatus[Any]) -> None:
        async def announce(*, task_status: trio.TaskStatus[Any]) -> None:
            await run_console(opts, TcpTransport(), task_status=task_status)

        async with trio.open_nursery() as n:
            server = await n.start(announce)
            mode = "actions need the token" if token else "read-only (no --token-file)"
            print(f"console: http://{server.addr}/ ({mode})", flush=True)
            task_status.started(server)

    name = f"console-{args.listen.rpartition(':')[2]}"
    return run_service(name, "console", args.log_dir, serve)
