"""JSON config files written atomically with a backup, plus the DataVersion they carry (M4).

Upstream's ConfigManager keeps topics.json, subscriptionGroup.json, consumerOffset.json,
delayOffset.json ... as JSON with a ``.bak`` copy of the previous version, and falls back to
the ``.bak`` when the main file is missing or empty. Here:

- `write_json_atomic`: temp file in the same directory, fsync, ``replace``, fsync of the
  directory. A reader sees the old or the new file, never a mix.
- `JsonConfigStore.persist`: writes the temp file, then renames the current file to ``.bak``
  and the temp file into place (then fsyncs the directory). A crash between the two renames
  leaves only the ``.bak``, which `load` reads, so the previous version is never lost.
- `JsonConfigStore.load`: the main file; if it is missing or empty, the ``.bak``; if it is
  unreadable or not JSON, the ``.bak`` when that is good (``loaded_from`` says which file was
  used, so the caller can log it), else a `ConfigFileError` naming both files.

`DataVersion` is the one in `rocketrio.protocol.bodies` (the wire and file shape are the same),
re-exported here for config tables.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from rocketrio.protocol.bodies import DataVersion
from rocketrio.storage.durable import makedirs_synced, read_file, write_file_atomic, write_synced
from rocketrio.storage.fs import OS_FS, FileSystem

__all__ = ["ConfigFileError", "DataVersion", "JsonConfigStore", "write_json_atomic"]


class ConfigFileError(Exception):
    """A config file that exists but cannot be used (and no usable backup)."""


def write_json_atomic(path: str, data: str | bytes, *, fs: FileSystem = OS_FS) -> None:
    """Replace ``path`` by ``data`` atomically and durably."""
    write_file_atomic(path, data.encode() if isinstance(data, str) else data, fs=fs)


def _read_json(
    path: str, fs: FileSystem, loads: Callable[[bytes], Any] = json.loads
) -> tuple[bool, Any]:
    """(present, value); an empty file counts as absent, like upstream."""
    try:
        raw = read_file(path, fs=fs)
    except FileNotFoundError:
        return False, None
    except OSError as e:
        raise ConfigFileError(f"cannot read config file {path}: {e.strerror}") from None
    if not raw.strip():
        return False, None
    try:
        return True, loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise ConfigFileError(f"config file {path} is not valid JSON: {e}") from None


class JsonConfigStore:
    """One JSON config file with a ``.bak`` of its previous version (see module docstring)."""

    def __init__(
        self, path: str, *, fs: FileSystem = OS_FS, loads: Callable[[bytes], Any] = json.loads
    ) -> None:
        self.path = path
        self._loads = loads  # fastjson.loads for files a Java broker may have written
        self.bak_path = path + ".bak"
        self._fs = fs
        self.loaded_from: str | None = None
        self._main_ok: bool | None = None  # None: not known yet
        self._dir_synced = False  # the first persist makes the directory durable (durable.py)

    def load(self, default: Callable[[], Any] = dict) -> Any:
        """The stored value, or ``default()`` when neither file has one."""
        try:
            present, value = _read_json(self.path, self._fs, self._loads)
        except ConfigFileError as main_error:
            self._main_ok = False
            try:
                present, value = _read_json(self.bak_path, self._fs, self._loads)
            except ConfigFileError as bak_error:
                raise ConfigFileError(f"{main_error}; backup unusable too: {bak_error}") from None
            if not present:
                raise
            self.loaded_from = self.bak_path
            return value
        if present:
            self._main_ok = True
            self.loaded_from = self.path
            return value
        present, value = _read_json(self.bak_path, self._fs, self._loads)
        self.loaded_from = self.bak_path if present else None
        return value if present else default()

    def persist(self, data: Any) -> None:
        """Write ``data`` (a JSON-able value, or JSON text) and keep the old file as .bak."""
        if isinstance(data, str | bytes):
            # never store what load would refuse
            self._loads(data if isinstance(data, bytes) else data.encode())
            raw = data.encode() if isinstance(data, str) else data
        else:
            raw = json.dumps(data, indent=4, ensure_ascii=False).encode()
        fs = self._fs
        directory = os.path.dirname(os.path.abspath(self.path))
        makedirs_synced(directory, fs=fs, sync_existing=not self._dir_synced)
        self._dir_synced = True
        tmp = self.path + ".tmp"
        write_synced(tmp, raw, fs=fs)
        if self._main_is_good():
            fs.replace(self.path, self.bak_path)
        fs.replace(tmp, self.path)
        fs.fsync_dir(directory)
        self._main_ok = True

    def _main_is_good(self) -> bool:
        # a damaged main file must not push a good backup out of the way
        if self._main_ok is None:
            try:
                self._main_ok = _read_json(self.path, self._fs, self._loads)[0]
            except ConfigFileError:
                self._main_ok = False
        return self._main_ok
