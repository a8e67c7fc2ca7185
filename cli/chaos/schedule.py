"""The fault schedule (pure): which faults, on which role, when, for how long.

A fault name is ``<kind>-<role>`` (``kill-master``, ``suspend-slave``, ``partition-master``,
``delay-controller-leader``...) or a combination of such steps joined by ``+`` (``suspend-
slave+kill-master``: the steps are injected in order, `STEP_GAP_S` apart, and healed together).
A partition may name the one role it cuts the target from: ``partition-slave-from-master`` (else
it cuts the target from every other process). A schedule is either named (``--fault kill-master
--every 30s``: that fault, every 30 s) or random from a seed (``--seed N``: one
`random.Random(N)` draws every fault and every pause, so a run's schedule replays exactly).
Faults start after a warm-up and stop before the drain at the end of the run; none overlaps
another (each is healed before the next starts).

Roles are resolved when a fault is injected (the master of now, not of the start), by the shell.
"""

from __future__ import annotations

import enum
import random

import attrs

STEP_GAP_S = 0.5  # between the steps of a combination


class FaultKind(enum.Enum):
    KILL = "kill"  # kill -9; restarted by `up` (or the config file's restart command)
    SUSPEND = "suspend"  # SIGSTOP, SIGCONT when healed
    PARTITION = "partition"  # packets between the target and the rest of the cluster dropped
    DELAY = "delay"  # the target's packets delayed
    DISK_FULL = "disk"  # the store's filesystem filled (a dedicated mount only)
    SLOW_DISK = "slowdisk"


class Role(enum.Enum):
    MASTER = "master"
    SLAVE = "slave"
    CONTROLLER_LEADER = "controller-leader"
    NAMESRV = "namesrv"


# a kind that ends by itself (the process is dead and restarted) rather than being healed
INSTANT = frozenset({FaultKind.KILL})


@attrs.frozen
class FaultStep:
    kind: FaultKind
    role: Role
    peer: Role | None = None  # a partition from this role only (None: from every process)

    @property
    def name(self) -> str:
        peer = f"-from-{self.peer.value}" if self.peer is not None else ""
        return f"{self.kind.value}-{self.role.value}{peer}"


@attrs.frozen
class PlannedFault:
    index: int
    at_s: float  # from the start of the run
    steps: tuple[FaultStep, ...]
    hold_s: float  # from the first step's injection to the heal

    @property
    def name(self) -> str:
        return "+".join(s.name for s in self.steps)

    @property
    def ends_s(self) -> float:
        return self.at_s + self.hold_s


class ScheduleError(ValueError):
    """A fault name or timing that cannot work; the message is one line for the user."""


def parse_fault(name: str) -> tuple[FaultStep, ...]:
    """``kill-master`` or ``suspend-slave+kill-master`` -> the steps."""
    steps = []
    for part in name.split("+"):
        kind_name, sep, rest = part.strip().partition("-")
        role_name, _, peer_name = rest.partition("-from-")
        try:
            kind = FaultKind(kind_name)
            role = Role(role_name)
            peer = Role(peer_name) if peer_name else None
        except ValueError:
            raise ScheduleError(
                f"unknown fault {part!r}: use <kind>-<role>, kinds "
                f"{', '.join(k.value for k in FaultKind)}, roles "
                f"{', '.join(r.value for r in Role)}"
            ) from None
        if not sep:
            raise ScheduleError(f"unknown fault {part!r}: use <kind>-<role>")
        if peer is not None and kind is not FaultKind.PARTITION:
            raise ScheduleError(f"{part!r}: only a partition has a -from-<role>")
        steps.append(FaultStep(kind, role, peer))
    return tuple(steps)


# what a random schedule draws from (every kind on every role it makes sense for, and the
# combination that most often loses acknowledged data in a broken build)
RANDOM_POOL: tuple[str, ...] = (
    "kill-master",
    "kill-slave",
    "kill-controller-leader",
    "suspend-master",
    "suspend-slave",
    "suspend-controller-leader",
    "partition-master",
    "partition-slave",
    "delay-master",
    "delay-slave",
    "disk-master",
    "slowdisk-master",
    "suspend-slave+kill-master",
    "partition-slave-from-master+kill-master",
    "kill-controller-leader+kill-master",
)


def usable(names: tuple[str, ...], unavailable: frozenset[FaultKind]) -> tuple[str, ...]:
    """The names whose every step is of an available kind."""
    return tuple(n for n in names if not any(s.kind in unavailable for s in parse_fault(n)))


@attrs.frozen
class Timing:
    duration_s: float
    warmup_s: float = 10.0
    drain_s: float = 20.0  # no fault starts in the last drain_s (consumers catch up)
    every_s: float = 15.0  # mean time from one fault's start to the next one's
    hold_s: float = 4.0  # how long a suspend, partition, delay or full disk lasts

    def check(self) -> None:
        if self.duration_s <= self.warmup_s + self.drain_s:
            raise ScheduleError(
                f"--duration {self.duration_s:g}s leaves no time for faults after the "
                f"{self.warmup_s:g}s warm-up and before the {self.drain_s:g}s drain"
            )
        if self.every_s <= self.hold_s:
            raise ScheduleError(
                f"--every {self.every_s:g}s must be longer than --hold {self.hold_s:g}s"
            )


def _hold(steps: tuple[FaultStep, ...], hold_s: float) -> float:
    """A lone kill is over when it is done; a combination holds its healable steps."""
    gaps = STEP_GAP_S * (len(steps) - 1)
    if all(s.kind in INSTANT for s in steps):
        return gaps
    return gaps + hold_s


def plan(timing: Timing, names: tuple[str, ...], seed: int | None) -> list[PlannedFault]:
    """Named (``seed`` None): the names in turn, every ``every_s``. Random: each fault drawn
    from ``names`` and each pause from [every/2, 3*every/2) with ``random.Random(seed)``."""
    timing.check()
    if not names:
        raise ScheduleError("no fault to inject (every fault kind asked for is unavailable)")
    parsed = [(n, parse_fault(n)) for n in names]
    rng = random.Random(seed) if seed is not None else None
    last_start = timing.duration_s - timing.drain_s
    out: list[PlannedFault] = []
    at = timing.warmup_s
    while True:
        if rng is None:
            _name, steps = parsed[len(out) % len(parsed)]
        else:
            _name, steps = parsed[rng.randrange(len(parsed))]
        hold = _hold(steps, timing.hold_s)
        if at + hold > last_start:
            return out
        out.append(PlannedFault(len(out), round(at, 3), steps, round(hold, 3)))
        pause = timing.every_s if rng is None else rng.uniform(0.5, 1.5) * timing.every_s
        at = max(at + pause, at + hold + 1.0)


def parse_seconds(text: str) -> float:
    """``30``, ``30s``, ``2m``, ``1h`` -> seconds."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    t = text.strip().lower()
    mult = 1.0
    if t and t[-1] in units:
        mult, t = units[t[-1]], t[:-1]
    try:
        value = float(t) * mult
    except ValueError:
        raise ScheduleError(f"{text!r} is not a duration (30, 30s, 2m, 1h)") from None
    if value <= 0:
        raise ScheduleError(f"{text!r} must be > 0")
    return value
