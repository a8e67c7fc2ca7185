"""The broker's JSON config files (topics.json, subscriptionGroup.json, consumerOffset.json).

A `ConfigFile` ties one file to the manager that owns its content. Writing is atomic
(`storage.config_store.write_json_atomic`: temp file, fsync, rename, fsync dir) and keeps the
previous version as ``<file>.bak`` like upstream's ConfigManager; loading falls back to the
``.bak`` when the main file is unreadable and fails with an error naming both files when
neither parses, never with a silent empty table.

The snapshot is taken on the Trio thread (so it is consistent with the tables) and the file
work runs in a worker thread, one write at a time per file. `mark_dirty` + `run_writer`
coalesce bursts (many auto-created topics -> few writes); `persist` writes now and is awaited
by admin calls so their answer means "on disk".
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import trio

from rocketrio.protocol.serde import HeaderError, from_json, to_json
from rocketrio.storage.config_store import write_json_atomic

T = TypeVar("T")


class ConfigFileError(Exception):
    """A config file (and its .bak) exists but cannot be read."""


class ConfigFile(Generic[T]):
    def __init__(
        self,
        path: str,
        cls: type[T],
        snapshot: Callable[[], T | None],
        run_blocking: Callable[[Callable[[], None]], Awaitable[None]] = trio.to_thread.run_sync,
    ) -> None:
        self.path = path
        self.run_blocking = run_blocking
        self.cls = cls
        self.snapshot = snapshot
        self._lock = trio.Lock()
        self._dirty = trio.Event()
        self.writes = 0

    # -- loading (blocking: call in a worker thread at start)
    def load(self) -> T | None:
        """The file's content, the .bak's when the file is bad, None when neither exists."""
        errors: list[str] = []
        for path in (self.path, self.path + ".bak"):
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            except OSError as e:
                errors.append(f"{path}: {e.strerror}")
                continue
            try:
                return from_json(self.cls, data)
            except HeaderError as e:
                errors.append(f"{path}: {e}")
        if errors:
            raise ConfigFileError("cannot load broker config: " + "; ".join(errors))
        return None

    # -- writing
    def mark_dirty(self) -> None:
        self._dirty.set()

    async def persist(self) -> None:
        """Snapshot now and write it; returns when the file is durable."""
        snap = self.snapshot()
        if snap is None:
            return
        data = to_json(snap)
        async with self._lock:
            await self.run_blocking(lambda: self._write(data))
            self.writes += 1

    def _write(self, data: bytes) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        try:
            with open(self.path, "rb") as f:
                previous = f.read()
        except FileNotFoundError:
            previous = None
        if previous is not None and previous != data:
            write_json_atomic(self.path + ".bak", previous)
        write_json_atomic(self.path, data)

    async def run_writer(self) -> None:
        """Write whenever marked dirty (bursts coalesce into one write)."""
        while True:
            await self._dirty.wait()
            self._dirty = trio.Event()
            await self.persist()

    async def run_periodic(self, period_s: float) -> None:
        """Write every period (the snapshot returns None when nothing changed)."""
        while True:
            await trio.sleep(period_s)
            await self.persist()
