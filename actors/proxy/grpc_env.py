"""grpcio's process-wide settings that only its environment carries, read once when grpcio
loads: which of grpc core's experiments a proxy process runs with.

grpc core serves its listening sockets through its EventEngine (the ``event_engine_listener``
experiment, on by default): the EventEngine's own threads read and write every connection,
then hand each completion over to the thread that waits on grpcio's completion queue, which in
grpcio's Python is not an EventEngine poller. Turned off (``GRPC_EXPERIMENTS=
-event_engine_listener``, the switch grpc's maintainers name for it), the server's connections
are polled by the completion-queue thread itself: one thread hand-over fewer per completion,
and a unary call (four completions in grpc.aio) costs the server a fifth to a quarter fewer
system calls, of them a fifth of the futex calls (docs/benchmarks.md, issue 28 item 4, fifth
pass).
Clients are not concerned (that is the ``event_engine_client`` experiment, left as it is).

An operator's own ``GRPC_EXPERIMENTS`` is kept as it is. The setting takes effect only when it
is in the environment before grpcio is imported, so the command-line shell sets it first
(cli/main.py); in a process that loaded grpcio already it is left alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Container, Mapping, MutableMapping

EXPERIMENTS_VAR = "GRPC_EXPERIMENTS"
PROXY_EXPERIMENTS = "-event_engine_listener"


def proxy_grpc_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to ``environ`` before a proxy loads grpcio: none an operator set."""
    if EXPERIMENTS_VAR in environ:
        return {}
    return {EXPERIMENTS_VAR: PROXY_EXPERIMENTS}


def prepare_grpc_environment(
    environ: MutableMapping[str, str] = os.environ,
    loaded: Container[str] = sys.modules,
) -> bool:
    """Set `proxy_grpc_environment` in this process's environment; False (nothing set) when
    grpcio is ``loaded`` already, since grpc core would not read it any more."""
    if "grpc" in loaded:
        return False
    environ.update(proxy_grpc_environment(environ))
    return True
