"""The NameServer's KV config (upstream KVConfigManager): namespace -> key -> value, held in
memory, persisted to ``kvConfigPath`` (kvConfig.json) when it is set, and the four requests that
read and change it (PUT_KV_CONFIG, GET_KV_CONFIG, DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE).

The NameServer reads namespace ORDER_TOPIC_CONFIG from it for routes and broker registrations.
A change is made in memory first, then the whole table is written (atomically, under a lock so
the last write carries every change); a failed write is answered SYSTEM_ERROR with the reason.
"""

from __future__ import annotations

from typing import Any

import trio

from rocketrio.actors.kernel.remoting import Processor, RequestContext
from rocketrio.actors.kernel.runtime import IoRunner
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import KVConfigSerializeWrapper, KVTable
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.config import ConfigError
from rocketrio.protocol.headers import (
    DeleteKVConfigRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    PutKVConfigRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, from_json, to_ext, to_json
from rocketrio.storage.config_store import write_json_atomic
from rocketrio.storage.durable import read_file
from rocketrio.storage.fs import OS_FS, FileSystem

_SUCCESS = ResponseCode.SUCCESS


class KVConfigTable:
    """namespace -> key -> value, upstream's KVConfigManager without the file part."""

    def __init__(self, table: dict[str, dict[str, str]] | None = None) -> None:
        self.table: dict[str, dict[str, str]] = table or {}

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> bool:
        entries = self.table.get(namespace)
        if entries is None or entries.pop(key, None) is None:
            return False
        if not entries:
            del self.table[namespace]
        return True

    def namespace(self, namespace: str) -> dict[str, str] | None:
        entries = self.table.get(namespace)
        return dict(entries) if entries is not None else None

    def to_json(self) -> bytes:
        return to_json(KVConfigSerializeWrapper(configTable=self.table))


def load_kv_file(path: str, fs: FileSystem = OS_FS) -> dict[str, dict[str, str]]:
    """Read kvConfig.json (blocking). Missing file: empty table. Damaged: ConfigError."""
    try:
        data = read_file(path, fs=fs)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise ConfigError(f"kvConfigPath: cannot read {path}: {e.strerror}") from None
    try:
        return from_json(KVConfigSerializeWrapper, data).configTable
    except HeaderError as e:
        raise ConfigError(f"kvConfigPath: {path} is not a KV config file: {e}") from None


def write_kv_file(path: str, data: bytes, fs: FileSystem = OS_FS) -> None:
    """Replace kvConfig.json atomically and durably (blocking)."""
    write_json_atomic(path, data, fs=fs)


class KVConfigManager:
    """The KV table of one NameServer, its file and its request handlers (`handlers`)."""

    def __init__(
        self, config: NamesrvConfig, *, io_runner: IoRunner, fs: FileSystem, log: Any
    ) -> None:
        self.config = config
        self.table = KVConfigTable()
        self._io = io_runner  # the NameServer's: a worker thread, or inline under a MockClock
        self.fs = fs
        self.log = log
        self._lock = trio.Lock()

    def handlers(self) -> dict[int, Processor]:
        rc = RequestCode
        return {
            rc.PUT_KV_CONFIG: self.handle_put_kv_config,
            rc.GET_KV_CONFIG: self.handle_get_kv_config,
            rc.DELETE_KV_CONFIG: self.handle_delete_kv_config,
            rc.GET_KVLIST_BY_NAMESPACE: self.handle_get_kv_list_by_namespace,
        }

    async def load(self) -> None:
        """Read kvConfigPath, when set, into the table (at start, before serving)."""
        if self.config.kvConfigPath:
            self.table = KVConfigTable(
                await self._io(load_kv_file, self.config.kvConfigPath, self.fs)
            )

    async def _persist(self) -> str | None:
        """Write the KV table if a file is configured; returns an error remark on failure."""
        path = self.config.kvConfigPath
        if not path:
            return None
        async with self._lock:
            # the snapshot is taken under the lock, so the last write carries every change
            data = self.table.to_json()
            try:
                await self._io(write_kv_file, path, data, self.fs)
            except OSError as e:
                events.emit(self.log, events.KvConfigPersistFailed(path=path, error=str(e)))
                return f"changed in memory but not saved to {path}: {e}"
        return None

    async def handle_put_kv_config(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(PutKVConfigRequestHeader, ctx.cmd.ext_fields)
        self.table.put(h.namespace, h.key, h.value)
        error = await self._persist()
        code = ResponseCode.SYSTEM_ERROR if error else _SUCCESS
        return ctx.cmd.make_response(code, error)

    async def handle_get_kv_config(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(GetKVConfigRequestHeader, ctx.cmd.ext_fields)
        value = self.table.get(h.namespace, h.key)
        if value is None:
            return ctx.cmd.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {h.namespace} Key: {h.key}",
            )
        ext = to_ext(GetKVConfigResponseHeader(value=value))
        return ctx.cmd.make_response(_SUCCESS, None, ext)

    async def handle_delete_kv_config(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(DeleteKVConfigRequestHeader, ctx.cmd.ext_fields)
        error = await self._persist() if self.table.delete(h.namespace, h.key) else None
        code = ResponseCode.SYSTEM_ERROR if error else _SUCCESS
        return ctx.cmd.make_response(code, error)

    async def handle_get_kv_list_by_namespace(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(GetKVListByNamespaceRequestHeader, ctx.cmd.ext_fields)
        entries = self.table.namespace(h.namespace)
        if entries is None:
            return ctx.cmd.make_response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace}"
            )
        return ctx.cmd.make_response(_SUCCESS, body=to_json(KVTable(table=entries)))
