"""delayOffset.json: how far the schedule service has re-put each delay level (upstream's file).

`DelayOffsetSerializeWrapper` is the file and the GET_ALL_DELAY_OFFSET (45) body, upstream's
shape: ``{"offsetTable": {level: next ConsumeQueue index}, "dataVersion": {...}}`` where level
is 1-based (queue id + 1 of SCHEDULE_TOPIC_XXXX). rocketrio adds ``timerOffsetTable`` (queue
id of rmq_sys_wheel_timer -> next index): the timer wheel's progress travels with the delay
levels' in one file and one sync call (an upstream reader ignores the extra field).

`DelayOffsetTable` is the pure manager: the schedule service records progress with `update`
(the DataVersion moves every delayOffsetUpdateVersionStep updates, like upstream's
versionChangeCounter), `snapshot_for_persist` gives what to write (None when nothing changed),
`adopt` takes a master's table (slave sync). `DelayOffsetFile` ties it to its `ConfigFile`:
written every flushDelayOffsetInterval and at shutdown.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import structlog
import trio

from rocketrio.actors.broker.store.view import RunBlocking
from rocketrio.actors.broker.tables.config_file import ConfigFile
from rocketrio.actors.broker.tables.json_table import JsonFileTable
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.bodies import DataVersion
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.storage.fs import OS_FS, FileSystem

DELAY_OFFSET_FILE = "delayOffset.json"
Handler = Callable[[RequestContext], Awaitable[RemotingCommand | None]]


@attrs.define(slots=True)
class DelayOffsetSerializeWrapper:
    """delayOffset.json and GET_ALL_DELAY_OFFSET's body (see module docstring)."""

    offsetTable: dict[int, int] = attrs.field(factory=dict)
    dataVersion: DataVersion = attrs.field(factory=DataVersion)
    timerOffsetTable: dict[int, int] = attrs.field(factory=dict)


class DelayOffsetTable:
    """Progress of each delay level and timer queue; see module docstring."""

    def __init__(self, now_ms: Callable[[], int], version_step: int = 200) -> None:
        self.now_ms = now_ms
        self.version_step = version_step
        self.levels: dict[int, int] = {}  # delay level (1-based) -> next index
        self.timers: dict[int, int] = {}  # timer queue id -> next index
        self.data_version = DataVersion()
        self.dirty = False
        self._changes = 0

    def level_offset(self, level: int) -> int:
        return self.levels.get(level, 0)

    def timer_offset(self, queue_id: int) -> int:
        return self.timers.get(queue_id, 0)

    def update_level(self, level: int, offset: int) -> None:
        self._update(self.levels, level, offset)

    def update_timer(self, queue_id: int, offset: int) -> None:
        self._update(self.timers, queue_id, offset)

    def _update(self, table: dict[int, int], key: int, offset: int) -> None:
        if table.get(key) == offset:
            return
        table[key] = offset
        self.dirty = True
        self._changes += 1
        if self._changes % self.version_step == 0:
            self.data_version = self.data_version.next_version(self.now_ms())

    def load(self, wrapper: DelayOffsetSerializeWrapper) -> None:
        self.levels = dict(wrapper.offsetTable)
        self.timers = dict(wrapper.timerOffsetTable)
        self.data_version = wrapper.dataVersion
        self.dirty = False

    def adopt(self, wrapper: DelayOffsetSerializeWrapper) -> bool:
        """A master's table (slave sync): its offsets replace ours; True when any changed."""
        if (wrapper.offsetTable, wrapper.timerOffsetTable) == (self.levels, self.timers):
            return False
        self.levels = dict(wrapper.offsetTable)
        self.timers = dict(wrapper.timerOffsetTable)
        self.data_version = wrapper.dataVersion
        self.dirty = True
        return True

    def snapshot(self) -> DelayOffsetSerializeWrapper:
        v = self.data_version
        return DelayOffsetSerializeWrapper(
            offsetTable=dict(self.levels),
            dataVersion=DataVersion(v.stateVersion, v.timestamp, v.counter),
            timerOffsetTable=dict(self.timers),
        )

    def snapshot_for_persist(self) -> DelayOffsetSerializeWrapper | None:
        if not self.dirty:
            return None
        self.dirty = False
        return self.snapshot()


class DelayOffsetFile(JsonFileTable):
    """The table with its file: `load_file` at open, `file.run_periodic` while running,
    `persist` at shutdown."""

    def __init__(
        self,
        path: str,
        table: DelayOffsetTable,
        *,
        run_blocking: RunBlocking = trio.to_thread.run_sync,
        fs: FileSystem = OS_FS,
    ) -> None:
        self.table = table
        self.log = structlog.get_logger("broker").bind(actor="delay_offset")
        self.file = ConfigFile(
            path, DelayOffsetSerializeWrapper, table.snapshot_for_persist, run_blocking, fs=fs
        )

    def files(self) -> tuple[ConfigFile[Any], ...]:
        return (self.file,)

    def _adopt_files(self, values: tuple[Any, ...]) -> None:
        self.table.load(values[0] or DelayOffsetSerializeWrapper())
