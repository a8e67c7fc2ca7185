"""Network faults between processes on this machine's loopback, with ``tc`` on ``lo`` (root).

`up` runs every process in the root network namespace on 127.0.0.1, so a fault cannot move
them into namespaces of their own; instead chaos classifies their packets on ``lo``:

- an ``htb`` root qdisc whose default class (10 Gbit/s) carries all other traffic as before;
  class 4 ends in a ``pfifo`` of length 0 (a **partition**: its packets vanish, connections
  hang, nothing is reset), class 5 is limited to `SLOW_KBIT` kbit/s with a deep queue (a
  **delay**: this kernel has no ``netem`` and no drop action, probed: only htb, tbf, pfifo and
  u32 are there, so a delay is a queueing delay behind a slow link, growing with the traffic);
- ``u32`` filters send a packet to a band by its ports. A partition of A from B covers every
  TCP connection between them: chaos reads A's and B's sockets (``/proc/<pid>/fd`` ->
  ``/proc/net/tcp``) and adds a filter per direction of each connection; it rescans every
  `RESCAN_S` while the partition lasts, so a connection opened meanwhile is cut within that
  time (its first packets may pass: the limit of doing this without namespaces). A delay
  delays every packet a process sends (all of its local ports).

Each fault's filters share one ``prio`` number and are deleted together when it is healed;
`teardown` deletes the root qdisc (lo is back to ``noqueue``). Refuses to start when ``lo``
already has a root qdisc (someone else's; chaos would change their setup).
Without root none of this runs: partition and delay faults are then reported unavailable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable

import attrs

RESCAN_S = 0.2
DROP_BAND, DELAY_BAND = 4, 5  # htb class ids 1:4 and 1:5
SLOW_KBIT = 256
TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")

TcRunner = Callable[[list[str], bool], str]  # tc arguments, check -> stdout


@attrs.frozen
class Conn:
    local_port: int
    remote_port: int
    inode: int
    listening: bool


def parse_proc_net_tcp(text: str) -> list[Conn]:
    """The rows of a ``/proc/net/tcp`` (or tcp6) table."""
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 10:
            continue
        local, remote, state, inode = f[1], f[2], f[3], int(f[9])
        out.append(
            Conn(
                int(local.rsplit(":", 1)[1], 16),
                int(remote.rsplit(":", 1)[1], 16),
                inode,
                state == "0A",
            )
        )
    return out


def socket_inodes(pid: int) -> set[int]:
    out = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.add(int(link[8:-1]))
    return out


def tcp_table() -> list[Conn]:
    rows: list[Conn] = []
    for path in TCP_TABLES:
        try:
            with open(path, encoding="ascii") as f:
                rows += parse_proc_net_tcp(f.read())
        except OSError:
            continue
    return rows


def conns_of(pid: int, table: list[Conn]) -> list[Conn]:
    inodes = socket_inodes(pid)
    return [c for c in table if c.inode in inodes]


def pairs_between(a: list[Conn], b: list[Conn]) -> set[tuple[int, int]]:
    """(sport, dport) of every packet of every connection between the socket sets a and b."""
    b_ports = {c.local_port for c in b if not c.listening}
    b_ports |= {c.local_port for c in b if c.listening}
    out = set()
    for c in a:
        if c.listening or c.remote_port not in b_ports:
            continue
        out.add((c.local_port, c.remote_port))
        out.add((c.remote_port, c.local_port))
    return out


def unavailable() -> str | None:
    """Why network faults cannot run here, or None."""
    if os.geteuid() != 0:
        return "partition and delay faults need root (tc on lo)"
    if shutil.which("tc") is None:
        return "tc (iproute2) is not installed"
    return None


class LoopbackNet:
    """The tc setup on lo; `run` is injectable for the tests."""

    def __init__(self, slow_kbit: int = SLOW_KBIT, run: TcRunner | None = None) -> None:
        self.slow_kbit = slow_kbit
        self.up = False
        self._next_prio = 10
        self._run = run or self._tc

    @staticmethod
    def _tc(args: list[str], check: bool) -> str:
        r = subprocess.run(["tc", *args], capture_output=True, text=True, check=False)
        if check and r.returncode != 0:
            raise OSError(f"tc {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def setup(self) -> None:
        if self.up:
            return
        shown = self._run(["qdisc", "show", "dev", "lo"], False)
        if shown.strip() and "noqueue" not in shown.split("\n")[0]:
            raise OSError(f"lo already has a qdisc ({shown.strip()}); not touching it")
        self.up = True  # from here on, teardown must run
        dev = ["dev", "lo"]
        self._run(["qdisc", "add", *dev, "root", "handle", "1:", "htb", "default", "1",
                   "r2q", "1000"], True)  # fmt: skip
        self._run(["class", "add", *dev, "parent", "1:", "classid", "1:1", "htb", "rate",
                   "10gbit"], True)  # fmt: skip
        self._run(["class", "add", *dev, "parent", "1:", "classid", f"1:{DROP_BAND}", "htb",
                   "rate", "10gbit"], True)  # fmt: skip
        self._run(["qdisc", "add", *dev, "parent", f"1:{DROP_BAND}", "handle", "40:", "pfifo",
                   "limit", "0"], True)  # fmt: skip
        rate = f"{self.slow_kbit}kbit"
        self._run(["class", "add", *dev, "parent", "1:", "classid", f"1:{DELAY_BAND}", "htb",
                   "rate", rate, "ceil", rate], True)  # fmt: skip
        self._run(["qdisc", "add", *dev, "parent", f"1:{DELAY_BAND}", "handle", "50:", "pfifo",
                   "limit", "100000"], True)  # fmt: skip

    def new_prio(self) -> int:
        self._next_prio += 1
        return self._next_prio

    def add(self, prio: int, band: int, pairs: Iterable[tuple[int | None, int | None]]) -> None:
        """A filter per (sport, dport) (None: any) sending matching packets to ``band``."""
        for sport, dport in pairs:
            match = []
            if sport is not None:
                match += ["match", "ip", "sport", str(sport), "0xffff"]
            if dport is not None:
                match += ["match", "ip", "dport", str(dport), "0xffff"]
            self._run(["filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip",
                       "prio", str(prio), "u32", *match, "flowid", f"1:{band}"], True)  # fmt: skip

    def remove(self, prio: int) -> None:
        if self.up:
            self._run(["filter", "del", "dev", "lo", "parent", "1:", "prio", str(prio)], False)

    def teardown(self) -> None:
        if self.up:
            self._run(["qdisc", "del", "dev", "lo", "root"], False)
            self.up = False
