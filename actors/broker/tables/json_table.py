"""The one base of the broker's JSON-file tables (upstream's ConfigManager): topics, groups,
consumer offsets, users and ACLs, static-topic mappings, delay offsets and ordered POP's state.

A table is its pure manager (no I/O, testable alone) plus this base, which owns the table's
`ConfigFile`s (config_file.py: atomic writes with a ``.bak``, in ``storePathRootDir/config``):
`load_file` reads every file in a worker thread and hands the values to the table's
`_adopt_files` (a file read from its ``.bak`` is logged, config_loaded_from_backup), `persist`
writes them now and returns when they are durable. What a table does on top (auto-created
entries marking the file dirty, a version bump before a write) is the table's own.
`OneFileTable` is the base of the tables kept in one file (topics, groups, offsets, static-topic
mappings): `open_file` names the file and `_adopt` takes its value.
"""

from __future__ import annotations

import abc
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
import trio

from rocketrio.actors.broker.tables.config_file import ConfigFile
from rocketrio.actors.observe import events
from rocketrio.storage.fs import OS_FS, FileSystem


class JsonFileTable(abc.ABC):
    log: Any

    @abc.abstractmethod
    def files(self) -> tuple[ConfigFile[Any], ...]:
        """The table's files, in the order `_adopt_files` gets their values."""

    @abc.abstractmethod
    def _adopt_files(self, values: tuple[Any, ...]) -> None:
        """Take the files' contents (None for a file that does not exist yet)."""

    async def load_file(self) -> bool:
        """Read every file (worker thread) and adopt them; True when one came from its .bak."""
        files = self.files()
        values = tuple([await f.run_blocking(f.load) for f in files])
        self._adopt_files(values)
        backed = [f for f in files if f.loaded_from_backup]
        for f in backed:
            events.emit(self.log, events.ConfigLoadedFromBackup(file=f.path))
        return bool(backed)

    async def persist(self) -> None:
        """Write every file now; returns when they are durable."""
        for f in self.files():
            await f.persist()


def config_path(store_root: str, name: str) -> str:
    """Where the broker keeps a config file: ``<storePathRootDir>/config/<name>``."""
    return os.path.join(store_root, "config", name)


class OneFileTable(JsonFileTable):
    """A table kept in one JSON file of the broker's config directory."""

    file: ConfigFile[Any]

    def open_file(
        self,
        broker_name: str,
        store_root: str,
        name: str,
        cls: type[Any],
        snapshot: Callable[[], Any],
        run_blocking: Callable[[Callable[[], None]], Awaitable[None]] = trio.to_thread.run_sync,
        *,
        fs: FileSystem = OS_FS,
        loads: Callable[[bytes], Any] = json.loads,
        **log_context: str,
    ) -> None:
        """Name the table's file (``<store_root>/config/<name>``, holding a ``cls``) and its log."""
        self.log = structlog.get_logger("broker").bind(broker=broker_name, **log_context)
        self.file = ConfigFile(
            config_path(store_root, name), cls, snapshot, run_blocking, fs=fs, loads=loads
        )

    def files(self) -> tuple[ConfigFile[Any], ...]:
        return (self.file,)

    def _adopt_files(self, values: tuple[Any, ...]) -> None:
        self._adopt(values[0])

    @abc.abstractmethod
    def _adopt(self, value: Any | None) -> None:
        """Take the file's content (None: the file does not exist yet)."""
