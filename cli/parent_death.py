"""The child side of `rocketrio up`'s supervision: a role process dies with its supervisor.

`up` starts each role with ``ROCKETRIO_SUPERVISOR_PID=<its pid>`` in the environment. The role
process then asks the kernel for a parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), so
it is killed the moment `up` dies, however `up` dies (kill -9 included), and checks that its parent
is still that pid: if `up` died before the prctl took effect, the process was already re-parented
and must not start. This is done in the child itself, at start, rather than in a ``preexec_fn``
(unsafe in a process with threads).

Linux delivers the signal when the *thread* that forked the child exits, so `up` must start its
children from a thread that lives as long as `up` (its main thread; see `up_supervisor`), never
from a worker thread. Elsewhere than Linux this is a no-op: `up` still stops its children on
SIGINT/SIGTERM/SIGHUP, but cannot take them down when it is killed with SIGKILL.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable, Mapping

SUPERVISOR_ENV = "ROCKETRIO_SUPERVISOR_PID"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class SupervisorGone(Exception):
    """The supervisor named in the environment is no longer our parent."""


def set_parent_death_signal(sig: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(sig), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG): {os.strerror(err)}")


def bind_to_supervisor(
    environ: Mapping[str, str] = os.environ,
    *,
    set_pdeathsig: Callable[[int], None] = set_parent_death_signal,
    getppid: Callable[[], int] = os.getppid,
    platform: str = sys.platform,
) -> int | None:
    """If started by `up`, die with it; returns the supervisor's pid (None: not supervised)."""
    value = environ.get(SUPERVISOR_ENV)
    if not value:
        return None
    try:
        pid = int(value)
    except ValueError:
        raise SupervisorGone(f"{SUPERVISOR_ENV}={value!r} is not a pid") from None
    if platform.startswith("linux"):
        set_pdeathsig(signal.SIGKILL)
    if getppid() != pid:
        raise SupervisorGone(f"supervisor rocketrio up (pid {pid}) is gone; not starting")
    return pid
