"""The garbage collector's settings of a broker process: the boot heap frozen, the young
generation collected after `YOUNG_THRESHOLD` new objects instead of CPython's 700.

The launcher applies them once a broker serves (cli/main.py `run_service`). Why: CPython
collects its young generation after every 700 net new container objects (tuples, lists,
dicts, instances), and every tenth of those collections the middle one, and now and then a
full collection walks the whole heap, most of it the modules, classes and tables loaded at boot.
A replicated master holds each turn's puts (requests, messages, results, answers) until the
slave acks the turn, so a burst of reads allocates past 700 before the frees that would offset
it: measured (i28-repl6, 20,000 single sends, 256 in flight) 90-122 young, 8-11 middle and one
full collection (33-59 ms) on the master, 2.4-4.3 us of its CPU per send, against 28-30 young
and at most one full collection on a lone broker (0.3-3.1 us per send). With the young
threshold at 10,000 neither had more than one young collection in 20,000 sends.

- `gc.freeze` after a collection moves everything the boot made to the permanent generation:
  it stays (modules and tables live as long as the process anyway), and no later collection
  walks it again.
- Cyclic garbage is found a little later (after at most 10,000 new objects instead of 700);
  nothing that is not garbage changes.
"""

from __future__ import annotations

import gc
from typing import Protocol

YOUNG_THRESHOLD = 10_000


class GcControl(Protocol):
    """The part of the `gc` module this policy uses (tests pass a recorder)."""

    def collect(self) -> int: ...

    def freeze(self) -> None: ...

    def get_threshold(self) -> tuple[int, int, int]: ...

    def set_threshold(self, threshold0: int, threshold1: int, threshold2: int, /) -> None: ...


def tune_server_gc(control: GcControl = gc) -> None:
    """Freeze what the boot made and raise the young generation's threshold (module doc);
    the middle and old thresholds stay. Once per process, after the boot."""
    control.collect()  # what the boot left as garbage goes before the freeze
    control.freeze()
    young, middle, old = control.get_threshold()
    control.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
