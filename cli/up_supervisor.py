"""The supervising shell of `rocketrio up`: one Trio nursery owning every role process.

Each role runs as ``rocketrio <role> -c <conf>`` in its own session and process group (so a
terminal's Ctrl-C reaches only `up`, and stragglers can be killed as a group), with
``ROCKETRIO_SUPERVISOR_PID`` set so the child binds its life to `up` (`parent_death`). A keeper
task per child waits for its exit (on a pidfd, no polling) and asks the shared `RestartPolicy` what
to do: restart after a backoff, or give up, which the caller turns into stopping the whole cluster.
`stop` takes the cluster down in reverse start order: SIGTERM to the group, SIGKILL after the grace
period (at once after `hurry`), then SIGKILL to whatever is left in the group.

Children are started from the Trio thread itself, not with ``trio.open_process``: that one forks
from a worker thread, and Linux sends the parent-death signal when the *forking thread* exits,
which Trio's idle worker threads do after 10 s; every child would then be killed 10 s after start.
Every exit, restart and give-up is a structured event in `up`'s JSON log (`events.Child*`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any, assert_never

import structlog
import trio

from rocketrio.actors.kernel.restart_policy import GiveUp, Restart, RestartPolicy, RestartTracker
from rocketrio.actors.observe import events
from rocketrio.cli.parent_death import SUPERVISOR_ENV
from rocketrio.cli.up_plan import ProcSpec

START_PAUSE_AFTER_NAMESRV_S = 0.3
KILL_WAIT_S = 5.0  # after SIGKILL, how long to wait for the exit before saying so


def describe_status(returncode: int) -> tuple[int | None, str | None]:
    """(exit code, signal name) of a Popen return code (negative: killed by that signal)."""
    if returncode >= 0:
        return returncode, None
    try:
        return None, signal.Signals(-returncode).name
    except ValueError:
        return None, f"signal {-returncode}"


def role_command(spec: ProcSpec, conf_path: str) -> list[str]:
    """``rocketrio <role> -c <conf> --name <name>`` with this interpreter."""
    cmd = [sys.executable, "-m", "rocketrio.cli.main", spec.role, "-c", conf_path]
    return [*cmd, "--name", spec.name]


def spawn(cmd: list[str], name: str, base_dir: str) -> subprocess.Popen[bytes]:
    """Start one child, output to ``logs/<name>.out``; call from the Trio (main) thread only,
    see the module docstring."""
    logs = os.path.join(base_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    env = os.environ | {SUPERVISOR_ENV: str(os.getpid())}
    with open(os.path.join(logs, f"{name}.out"), "ab") as out:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own session and process group (pgid == pid)
        )


async def wait_exit(popen: subprocess.Popen[bytes]) -> int:
    """Wait for the process to end (and reap it); its Popen return code."""
    if popen.returncode is not None:
        return popen.returncode
    try:
        fd = os.pidfd_open(popen.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel or not Linux): a waiting thread
        return await trio.to_thread.run_sync(popen.wait, abandon_on_cancel=True)
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)
    return popen.wait()


def kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # nobody left in the group


class Slot:
    """One child process of the plan, across its restarts."""

    def __init__(self, spec: ProcSpec, conf_path: str, policy: RestartPolicy) -> None:
        self.spec, self.conf_path = spec, conf_path
        self.tracker = RestartTracker(policy)
        self.popen: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.exited = trio.Event()
        self.last_returncode: int | None = None

    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen is not None and not self.exited.is_set()


class Supervisor:
    def __init__(
        self,
        specs: list[ProcSpec],
        conf_paths: dict[str, str],
        base_dir: str,
        policy: RestartPolicy,
        *,
        say: Callable[[str], None],
        say_err: Callable[[str], None],
        command: Callable[[ProcSpec, str], list[str]] = role_command,
    ) -> None:
        self.slots = [Slot(s, conf_paths[s.name], policy) for s in specs]
        self.base_dir = base_dir
        self.say, self.say_err = say, say_err
        self.command = command
        self.log = structlog.get_logger("supervisor").bind(actor="supervisor")
        self.gave_up = trio.Event()
        self.gave_up_line = ""
        self.stopping = False
        self._hurry = False
        self._grace_scope: trio.CancelScope | None = None
        self._nursery: trio.Nursery | None = None

    def slot(self, name: str) -> Slot:
        return next(s for s in self.slots if s.spec.name == name)

    def pid_line(self, slot: Slot) -> str:
        s = slot.spec
        return f"  {s.role:8} {s.name:10} {s.addr:18} pid {slot.pid}"

    def _start(self, slot: Slot, restart: int) -> None:
        slot.exited = trio.Event()
        cmd = self.command(slot.spec, slot.conf_path)
        slot.popen = spawn(cmd, slot.spec.name, self.base_dir)
        slot.started_at = trio.current_time()
        events.emit(
            self.log, events.ChildStarted(child=slot.spec.name, pid=slot.pid, restart=restart)
        )

    async def run(
        self, *, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start every child in plan order and keep them running until `stop`."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for slot in self.slots:
                if self.stopping:
                    break
                self._start(slot, 0)
                nursery.start_soon(self._keep, slot)
                if slot.spec.role == "namesrv":
                    await trio.sleep(START_PAUSE_AFTER_NAMESRV_S)
            task_status.started(self)
            await trio.sleep_forever()

    async def _keep(self, slot: Slot) -> None:
        while True:
            assert slot.popen is not None
            pid = slot.popen.pid
            rc = await wait_exit(slot.popen)
            ran_s = round(trio.current_time() - slot.started_at, 3)
            slot.last_returncode = rc
            slot.exited.set()
            code, sig = describe_status(rc)
            fields: dict[str, Any] = dict(
                child=slot.spec.name, pid=pid, exit_code=code, signal=sig, ran_s=ran_s
            )
            if self.stopping:
                events.emit(self.log, events.ChildExited(**fields, stopping=True, gave_up=False))
                return
            decision = slot.tracker.on_exit(ran_s)
            match decision:
                case GiveUp(restarts=restarts):
                    events.emit(
                        self.log,
                        events.ChildExited(
                            **fields,
                            stopping=False,
                            restart=None,
                            next_delay_s=None,
                            gave_up=True,
                            restarts=restarts,
                        ),
                        level="error",
                    )
                    out = os.path.join(self.base_dir, "logs", f"{slot.spec.name}.out")
                    self.gave_up_line = (
                        f"{slot.spec.name} keeps exiting (status {rc}, {restarts} restarts in a "
                        f"row); giving up, see {out}"
                    )
                    self.gave_up.set()
                    return
                case Restart(delay_s=delay_s, restart=restart):
                    events.emit(
                        self.log,
                        events.ChildExited(
                            **fields,
                            stopping=False,
                            restart=restart,
                            next_delay_s=delay_s,
                            gave_up=False,
                        ),
                        level="warning",
                    )
                    self.say(f"{slot.spec.name} exited with status {rc}; restarting in {delay_s}s")
                    await trio.sleep(delay_s)
                    if self.stopping:
                        return
                    self._start(slot, restart)
                    self.say(self.pid_line(slot))
                case _:
                    assert_never(decision)

    def hurry(self) -> None:
        """Skip the rest of the grace period: kill what is left at once."""
        self._hurry = True
        if self._grace_scope is not None:
            self._grace_scope.cancel()

    async def stop(self, grace_s: float) -> None:
        """Stop every child in reverse start order, then end `run`."""
        self.stopping = True
        for slot in reversed(self.slots):
            await self._stop_one(slot, grace_s)
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _stop_one(self, slot: Slot, grace_s: float) -> None:
        if slot.popen is None:
            return
        pgid = slot.popen.pid
        if slot.running:
            kill_group(pgid, signal.SIGTERM)
            with trio.move_on_after(0 if self._hurry else grace_s) as scope:
                self._grace_scope = scope
                await slot.exited.wait()
            self._grace_scope = None
            if slot.running:
                events.emit(
                    self.log,
                    events.ChildStopEscalated(child=slot.spec.name, pid=pgid, grace_s=grace_s),
                )
                self.say_err(f"  {slot.spec.name} did not stop in time; killing it")
                kill_group(pgid, signal.SIGKILL)
                with trio.move_on_after(KILL_WAIT_S):
                    await slot.exited.wait()
                if slot.running:  # not even SIGKILL ended it (stuck in the kernel?): say so
                    events.emit(
                        self.log,
                        events.ChildStopEscalated(
                            child=slot.spec.name,
                            pid=pgid,
                            grace_s=grace_s,
                            unkillable_after_s=KILL_WAIT_S,
                        ),
                        level="error",
                    )
                    self.say_err(f"  {slot.spec.name} (pid {pgid}) survived SIGKILL; check it")
        kill_group(pgid, signal.SIGKILL)  # anything it left behind in its group
