"""Which master keeps the POP records of an acting slave (RIP-32, SPEC A1/A3), pure: no I/O.

A slave acting for its dead master serves POP from the log it replicated, but it cannot write the
CK (its CommitLog must not fork from the master's), nor the later ACK or CHANGE_INVISIBLE_TIME
records of the same message. They go to a live master of another group (escape), and they only
cancel there if they all reach the SAME master: that master's revive service matches the ACK to
the CK by the merge key (topic, group, queue, start offset, pop time, brokerName) within one
revive queue of its own log.

`PopPins` decides, per merge key:

- a new CK is pinned to one of the candidate masters, chosen deterministically (a stable hash
  of the key over the candidate names sorted), never this broker's own group (the dead master's,
  upstream #7923) whatever the candidate list says;
- every later record of that key goes to the pinned master, even when the route no longer lists
  it (writing it elsewhere would not cancel the CK); the writer retries until it is written;
- CHANGE_INVISIBLE_TIME's new CK joins its old CK's master (the shell pins it there), since the
  two records are written there together;
- a key never pinned (this slave restarted, or the pin was evicted) falls back to the same
  deterministic choice, which names the same master while the candidates are unchanged.

Pins are forgotten when every message of their CK was acknowledged (`acked`) or when more than
`max_pins` are held (oldest first: the fallback above then usually gives the same answer).

Upstream (EscapeBridge.putMessageToSpecificQueue) hashes topic + storeHost over the current route
on every write, so a route change between the CK and its ACK sends them to different masters and
the message is delivered again; the pin is remembered here instead.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Sequence

from rocketrio.protocol.pop_checkpoint import MergeKey

MAX_PINS = 100_000


def key_text(key: MergeKey) -> str:
    return "@".join(str(part) for part in key)


def choose_master(key: MergeKey, candidates: Sequence[str], own_group: str) -> str | None:
    """The deterministic choice for ``key`` among ``candidates`` (names of live masters of other
    groups), never ``own_group``; None when there is none."""
    names = sorted({c for c in candidates if c != own_group})
    if not names:
        return None
    return names[zlib.crc32(key_text(key).encode()) % len(names)]


class PopPins:
    """The merge key -> master table of one acting slave (module docstring)."""

    def __init__(self, own_group: str, max_pins: int = MAX_PINS) -> None:
        self.own_group = own_group
        self.max_pins = max_pins
        self._pins: OrderedDict[MergeKey, tuple[str, int]] = OrderedDict()  # master, unacked

    def __len__(self) -> int:
        return len(self._pins)

    def pinned(self, key: MergeKey) -> str | None:
        found = self._pins.get(key)
        return None if found is None else found[0]

    def target(self, key: MergeKey, candidates: Sequence[str]) -> str | None:
        """Where a record of ``key`` goes: its pin, else the deterministic choice (not pinned
        until `pin` is called: a CK that was not written pins nothing)."""
        pinned = self.pinned(key)
        if pinned is not None:
            return pinned
        return choose_master(key, candidates, self.own_group)

    def pin(self, key: MergeKey, master: str, num: int) -> None:
        """The CK of ``key`` (``num`` messages) was written to ``master``."""
        if master == self.own_group:
            raise ValueError(f"a POP record never escapes to its own group {master}")
        self._pins[key] = (master, num)
        self._pins.move_to_end(key)
        while len(self._pins) > self.max_pins:
            self._pins.popitem(last=False)

    def acked(self, key: MergeKey, count: int) -> None:
        """``count`` messages of ``key``'s CK were acknowledged at its master."""
        found = self._pins.get(key)
        if found is None:
            return
        master, left = found
        if left - count <= 0:
            del self._pins[key]
        else:
            self._pins[key] = (master, left - count)
