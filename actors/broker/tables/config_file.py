"""The broker's JSON config files (topics.json, subscriptionGroup.json, consumerOffset.json).

A `ConfigFile` ties one file to the manager that owns its content. The file work is the
storage helper's `JsonConfigStore`: atomic writes that keep the previous version as
``<file>.bak``, and loads that fall back to the ``.bak`` when the main file is damaged and
fail with an error naming both files when neither is usable, never with a silent empty table.
A file that is valid JSON but not the expected shape is an error naming the file too.

The snapshot is taken on the Trio thread (so it is consistent with the tables) and the file
work runs off it (``run_blocking``), one write at a time per file. `mark_dirty` + `run_writer`
coalesce bursts (many auto-created topics -> few writes); `persist` writes now and is awaited
by admin calls so their answer means "on disk".

A full disk (ENOSPC, EDQUOT) is not fatal: the atomic write leaves the previous file as it was,
the background writers log config_persist_failed and try again (`run_writer` after
`RETRY_S`, `run_periodic` at its next period), and a snapshot that could not be written is
written by the next attempt even when nothing changed since (the manager already counted it as
written). Any other error stops the writer, as before.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import structlog
import trio

from rocketrio.actors.broker.store.disk_faults import DISK_FULL_ERRNOS
from rocketrio.actors.observe import events
from rocketrio.protocol.serde import HeaderError, from_plain, to_json
from rocketrio.storage.config_store import ConfigFileError, JsonConfigStore
from rocketrio.storage.fs import OS_FS, FileSystem

T = TypeVar("T")

RETRY_S = 1.0  # a write the full disk refused is tried again this much later


class ConfigFile(Generic[T]):
    def __init__(
        self,
        path: str,
        cls: type[T],
        snapshot: Callable[[], T | None],
        run_blocking: Callable[[Callable[[], None]], Awaitable[None]] = trio.to_thread.run_sync,
        *,
        fs: FileSystem = OS_FS,
        loads: Callable[[bytes], Any] = json.loads,
    ) -> None:
        self.path = path
        self.store = JsonConfigStore(path, fs=fs, loads=loads)
        self.run_blocking = run_blocking
        self.cls = cls
        self.snapshot = snapshot
        self._lock = trio.Lock()
        self._dirty = trio.Event()
        self._unwritten: T | None = None  # the snapshot a failed write did not store
        self.log = structlog.get_logger("broker").bind(actor="config_file")

    # -- loading (blocking: call off the Trio thread at start)
    def load(self) -> T | None:
        """The file's content (the .bak's when the file is damaged), None when neither exists."""
        value = self.store.load(default=lambda: None)
        if value is None:
            return None
        try:
            return from_plain(self.cls, value)
        except HeaderError as e:
            raise ConfigFileError(f"config file {self.store.loaded_from} is not a {e}") from None

    @property
    def loaded_from_backup(self) -> bool:
        return self.store.loaded_from == self.store.bak_path

    # -- writing
    def mark_dirty(self) -> None:
        self._dirty.set()

    async def persist(self) -> None:
        """Snapshot now and write it; returns when the file is durable."""
        snap = self.snapshot()
        if snap is None:
            snap = self._unwritten
            if snap is None:
                return
        data = to_json(snap)
        async with self._lock:
            try:
                await self.run_blocking(lambda: self._write(data))
            except BaseException:
                self._unwritten = snap
                raise
            self._unwritten = None

    async def _persist_in_background(self) -> bool:
        """`persist` for the background writers: False when a full disk refused it (logged)."""
        try:
            await self.persist()
        except OSError as e:
            if e.errno not in DISK_FULL_ERRNOS:
                raise
            events.emit(self.log, events.ConfigPersistFailed(path=self.path, error=str(e)))
            return False
        return True

    def _write(self, data: bytes) -> None:
        self.store.persist(data)

    async def run_writer(self) -> None:
        """Write whenever marked dirty (bursts coalesce into one write)."""
        while True:
            await self._dirty.wait()
            self._dirty = trio.Event()
            if not await self._persist_in_background():
                await trio.sleep(RETRY_S)
                self._dirty.set()

    async def run_periodic(self, period_s: float) -> None:
        """Write every period (the snapshot returns None when nothing changed)."""
        while True:
            await trio.sleep(period_s)
            await self._persist_in_background()
