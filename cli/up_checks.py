"""Checks of `rocketrio up`'s flags against this machine, each failure one line for the user.

`check_dir` (``--dir`` usable: a directory we can create and write) and `busy_ports` (a planned
port already taken, naming the process that holds it when /proc tells us). The pure checks of the
flags themselves (ranges, collisions, mode) are in `up_plan`.
"""

from __future__ import annotations

import errno
import os
import socket

from rocketrio.cli.up_plan import ProcSpec


def check_dir(path: str) -> str | None:
    """None when ``path`` is (or can be made) a writable directory, else the one-line reason."""
    if os.path.exists(path) and not os.path.isdir(path):
        return f"--dir {path} is a file, not a directory"
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        return f"--dir {path} cannot be created: {e.strerror or e}"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"--dir {path} is not writable by this user"
    return None


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            # local_address is HEXIP:HEXPORT, st 0A is LISTEN
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes


def who_listens(port: int) -> str | None:
    """ "pid N (command)" of a process listening on ``port``, if /proc lets us see it."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    targets = {f"socket:[{i}]" for i in inodes}
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # gone, or another user's process
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") in targets:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
                    return f"pid {pid} ({cmd[:120]})"
            except OSError:
                continue
    return None


def port_busy(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on now ("already in use by ..."), or None."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do
        try:
            sock.bind((host, port))
            return None
        except OSError as e:
            why = "permission denied" if e.errno == errno.EACCES else "already in use"
    holder = who_listens(port) if why == "already in use" else None
    return why + (f" by {holder}" if holder else "")


def busy_ports(specs: list[ProcSpec]) -> list[str]:
    """One description per planned port that cannot be listened on now."""
    busy = []
    for s in specs:
        host = s.addr.rpartition(":")[0] or "127.0.0.1"
        for use in s.listens:
            if (why := port_busy(host, use.port)) is not None:
                busy.append(f"{host}:{use.port} ({s.name} {use.what}) {why}")
    return busy
