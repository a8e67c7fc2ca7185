"""How a CLI tool fails: exit codes and the one line a person reads instead of a traceback.

Every `rocketrio produce | consume | admin` run ends with one of three exit codes:

- ``EXIT_OK`` (0): done; a query found what it asked for.
- ``EXIT_FAILED`` (1): the thing asked for is missing (topic, group, broker, cluster, message),
  a server refused (a response code with its remark), or no server answered (the address is in
  the line).
- ``EXIT_USAGE`` (2): the arguments are wrong (argparse's own errors use 2 as well).

`describe_failure` turns an exception into that code and a single line (no newlines, the
exception's own text, prefixed by the tool's name); it is pure. Errors the client API knows
(`MQClientError`, `RemotingError`, `HeaderError`, a Trio timeout) are stated plainly; anything
else is a bug, and the line says so with the exception type.

`run_tool` is the shell every tool runs in: ``trio.run`` of the tool's async entry with the
`Wiring` (real TCP by default), the failure printed as its one line. `run_tool_async` is the
same inside a running Trio loop: the in-process tests call it (through `main_async` in
cli/main.py) with a `Wiring` onto a SimNetwork host.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.errors import MQClientError, UsageError
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.actors.kernel.transport import Transport
from rocketrio.protocol.serde import HeaderError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


@attrs.frozen
class Failure:
    """What the tool prints on stderr (one line) and the status it exits with."""

    exit_code: int
    line: str


# Trio's connect error repeats the address the line already names
_TRIO_CONNECT_NOISE = re.compile(r": all attempts to connect to \S+ failed")


def one_line(text: str) -> str:
    """Collapse newlines and runs of blanks, so a remark never spans lines."""
    return " ".join(_TRIO_CONNECT_NOISE.sub("", text).split())


def leaf_exception(exc: BaseException) -> BaseException:
    """The single exception inside nested one-member exception groups (Trio nurseries wrap)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def describe_failure(tool: str, exc: BaseException) -> Failure:
    """The exit code and the one line for a run of ``tool`` that raised ``exc``."""
    exc = leaf_exception(exc)
    if isinstance(exc, trio.TooSlowError | TimeoutError):  # Trio or anyio (the client)
        return Failure(EXIT_FAILED, f"{tool}: no answer in time")
    text = one_line(str(exc)) or type(exc).__name__
    if isinstance(exc, UsageError):
        return Failure(EXIT_USAGE, f"{tool}: {text}")
    if isinstance(exc, MQClientError | RemotingError | HeaderError):
        return Failure(EXIT_FAILED, f"{tool}: {text}")
    if isinstance(exc, OSError):
        return Failure(EXIT_FAILED, f"{tool}: {type(exc).__name__}: {text}")
    return Failure(EXIT_FAILED, f"{tool}: unexpected error (a bug): {type(exc).__name__}: {text}")


@attrs.frozen
class Wiring:
    """How a tool's clients reach the cluster: ``None`` is real TCP with the default client
    config; tests give a SimNetwork host's transport and a ClientConfig naming that host."""

    transport: Transport | None = None
    client_config: ClientConfig | None = None

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for Producer / PushConsumer."""
        kw: dict[str, Any] = {"transport": self.transport}
        if self.client_config is not None:
            kw["client_config"] = self.client_config
        return kw


ToolEntry = Callable[[Any, Wiring], Awaitable[int]]


async def run_tool_async(tool: str, entry: ToolEntry, args: Any, wiring: Wiring) -> int:
    """Run ``entry(args, wiring)``; a failure is printed as one line and becomes the code."""
    try:
        return int(await entry(args, wiring))
    except Exception as e:  # one readable line, not a traceback, for a person at a terminal
        failure = describe_failure(tool, e)
        print(failure.line, file=sys.stderr)
        return failure.exit_code


def run_tool(tool: str, entry: ToolEntry, args: Any, wiring: Wiring | None = None) -> int:
    """The process-level shell: client logging off the console, one Trio run, Ctrl-C -> 130."""
    from rocketrio.actors.observe.logs import configure_logging

    configure_logging(tool.replace(" ", "-"), "client", None, console=None)
    try:
        return trio.run(run_tool_async, tool, entry, args, wiring or Wiring())
    except KeyboardInterrupt:
        return 130
