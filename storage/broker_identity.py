"""The broker's persistent identity files: ``broker.meta`` and ``.broker.meta.temp``.

The persistent-BrokerId flow (seeds/persistent-unique-broker-id.zh.md) keeps the id a broker is
applying for in ``.broker.meta.temp`` (brokerId + registerCheckCode) until the controller accepted
it, then atomically turns the temp file into ``broker.meta``. Every write is temp file + fsync +
rename + directory fsync, so a kill -9 leaves either the old or the new file, never a torn one.
``commit_temp`` is a single rename: the seed's "delete temp and create meta atomically".

File format: ``key=value`` lines (clusterName, brokerName, brokerId, registerCheckCode) and a
``crc`` line over the others, so a file damaged outside our write path is reported, not trusted.
"""

from __future__ import annotations

import os
import zlib

import attrs

from rocketrio.storage.durable import read_file, write_file_atomic
from rocketrio.storage.fs import OS_FS, FileSystem

META_FILE = "broker.meta"
TEMP_FILE = ".broker.meta.temp"


class BrokerIdentityError(Exception):
    """An identity file exists but cannot be trusted (damaged or for another broker)."""


@attrs.frozen
class BrokerMeta:
    cluster_name: str
    broker_name: str
    broker_id: int
    register_check_code: str

    def encode(self) -> bytes:
        body = (
            f"clusterName={self.cluster_name}\nbrokerName={self.broker_name}\n"
            f"brokerId={self.broker_id}\nregisterCheckCode={self.register_check_code}\n"
        )
        return (body + f"crc={zlib.crc32(body.encode()):08x}\n").encode()

    @classmethod
    def decode(cls, data: bytes, path: str) -> BrokerMeta:
        text = data.decode("utf-8", errors="replace")
        body, _, crc_line = text.rpartition("crc=")
        try:
            ok = int(crc_line.strip(), 16) == zlib.crc32(body.encode())
        except ValueError:
            ok = False
        if not ok:
            raise BrokerIdentityError(f"{path}: checksum mismatch; the identity file is damaged")
        kv = dict(line.split("=", 1) for line in body.splitlines() if "=" in line)
        try:
            return cls(
                kv["clusterName"], kv["brokerName"], int(kv["brokerId"]), kv["registerCheckCode"]
            )
        except (KeyError, ValueError) as e:
            raise BrokerIdentityError(f"{path}: missing or bad field {e}") from None


def _read(directory: str, name: str, fs: FileSystem) -> BrokerMeta | None:
    path = os.path.join(directory, name)
    try:
        data = read_file(path, fs=fs)
    except FileNotFoundError:
        return None
    return BrokerMeta.decode(data, path)


class BrokerIdentityStore:
    """The identity directory (``storePathBrokerIdentity``) of one broker."""

    def __init__(self, directory: str, *, fs: FileSystem = OS_FS) -> None:
        self.directory = directory
        self._fs = fs

    def read_meta(self) -> BrokerMeta | None:
        return _read(self.directory, META_FILE, self._fs)

    def read_temp(self) -> BrokerMeta | None:
        return _read(self.directory, TEMP_FILE, self._fs)

    def write_temp(self, meta: BrokerMeta) -> None:
        write_file_atomic(os.path.join(self.directory, TEMP_FILE), meta.encode(), fs=self._fs)

    def delete_temp(self) -> None:
        try:
            self._fs.unlink(os.path.join(self.directory, TEMP_FILE))
        except FileNotFoundError:
            return
        self._fs.fsync_dir(self.directory)

    def commit_temp(self) -> BrokerMeta:
        """Turn the temp file into broker.meta in one rename (durable before returning)."""
        temp = self.read_temp()
        if temp is None:
            raise BrokerIdentityError(f"{self.directory}: no {TEMP_FILE} to commit")
        self._fs.replace(
            os.path.join(self.directory, TEMP_FILE), os.path.join(self.directory, META_FILE)
        )
        self._fs.fsync_dir(self.directory)
        return temp

    def check_owner(self, meta: BrokerMeta, cluster: str, broker_name: str) -> None:
        if (meta.cluster_name, meta.broker_name) != (cluster, broker_name):
            raise BrokerIdentityError(
                f"{self.directory}: identity belongs to {meta.cluster_name}/{meta.broker_name}, "
                f"not {cluster}/{broker_name}; use another storePathBrokerIdentity"
            )
