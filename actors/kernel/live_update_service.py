"""The shell of a live config update: one per process role (broker, NameServer, controller).

`ConfigUpdater.update(body)` runs one UPDATE_*_CONFIG request, one at a time (upstream's
``synchronized``): the pure decision (actors/kernel/live_update.py), then the config file, then the
running process, then the log:

1. refused -> nothing changes; WARN events.ConfigUpdateRefused.NAME names the keys and why;
2. the changed keys are written into the config file (`config_path()`: the file the process
   was started with, or its configStorePath) first, durably (storage/properties_file.py); a
   write that fails refuses the request (SYSTEM_ERROR naming the file) and changes nothing
   else; a process started without a file applies the change live only and says so;
3. the changed keys are set on the running config object and the role's ``apply`` hook tells
   the collaborators that copied a value at start (the broker's send and pull settings, ...);
4. INFO events.ConfigUpdated.NAME once per changed key (old and new value, the file, the caller).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, assert_never

import structlog
import trio

from rocketrio.actors.kernel.live_update import (
    ConfigApplied,
    ConfigChange,
    ConfigRefused,
    UpdatePolicy,
    apply_in_place,
    parse_update_body,
    plan_update,
)
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.kernel.runtime import IoRunner
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.properties_file import update_properties_file

C = TypeVar("C")
NOT_PERSISTED_REMARK = (
    "applied to the running {role} only: it was started without a config file, so a restart "
    "goes back to the old value"
)


class ConfigUpdater(Generic[C]):
    def __init__(
        self,
        config: C,
        policy: UpdatePolicy,
        *,
        config_path: Callable[[], str | None],
        apply: Callable[[tuple[ConfigChange, ...]], None] = lambda _changes: None,
        io_runner: IoRunner | None = None,
        fs: FileSystem = OS_FS,
        log: Any = None,
    ) -> None:
        self.config = config
        self.policy = policy
        self.config_path = config_path
        self.apply = apply
        self._io: IoRunner = io_runner or trio.to_thread.run_sync
        self.fs = fs
        self.log = log or structlog.get_logger("config")
        self._lock = trio.Lock()

    async def update(self, body: bytes, by: str) -> ConfigApplied[C] | ConfigRefused:
        async with self._lock:
            values = parse_update_body(body)
            if isinstance(values, ConfigRefused):
                return self._refused(values, [], by)
            plan = plan_update(self.policy, self.config, values)
            if isinstance(plan, ConfigRefused):
                return self._refused(plan, sorted(values), by)
            path = self.config_path()
            if plan.changes and path:
                try:
                    await self._io(lambda: update_properties_file(path, plan.updates, fs=self.fs))
                except OSError as e:
                    return self._refused(
                        ConfigRefused(
                            ResponseCode.SYSTEM_ERROR,
                            f"cannot write the config file {path} ({e.strerror or e}); "
                            "nothing was changed",
                        ),
                        sorted(values),
                        by,
                    )
            apply_in_place(self.config, plan.changes)
            self.apply(plan.changes)
            for c in plan.changes:
                events.emit(
                    self.log,
                    events.ConfigUpdated(
                        config_role=self.policy.role,
                        key=c.key,
                        old=c.old,
                        new=c.new,
                        persisted_to=path or None,
                        by=by,
                    ),
                )
            return plan

    async def handle(self, ctx: RequestContext) -> RemotingCommand:
        """The request handler (the same for the three roles)."""
        out = await self.update(ctx.cmd.body or b"", ctx.conn.remote)
        match out:
            case ConfigRefused():
                return ctx.cmd.make_response(out.code, out.remark)
            case ConfigApplied():
                return ctx.cmd.make_response(ResponseCode.SUCCESS, self.remark_of(out))
            case _:
                assert_never(out)

    def remark_of(self, applied: ConfigApplied[C]) -> str | None:
        """The SUCCESS answer's remark: None (as upstream) unless the change is live only."""
        if applied.changes and not self.config_path():
            return NOT_PERSISTED_REMARK.format(role=self.policy.role)
        return None

    def _refused(self, refused: ConfigRefused, keys: list[str], by: str) -> ConfigRefused:
        events.emit(
            self.log,
            events.ConfigUpdateRefused(
                config_role=self.policy.role,
                keys=keys,
                code=refused.code.name,
                remark=refused.remark,
                by=by,
            ),
        )
        return refused
