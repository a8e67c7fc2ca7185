"""The broker's users and ACLs with their files: `AuthTable` is the pure `AuthMetadata` plus
``users.json`` and ``acls.json`` in ``storePathRootDir/config``, written by the same durable
config-store code as topics.json (atomic replace, ``.bak`` of the previous version, fallback to
it on a damaged file, an error naming both files when neither is usable).

Every change is persisted before the admin call is answered, so SUCCESS means "on disk". At
start the files are loaded, then initAuthenticationUser and innerClientAuthenticationCredentials
are made sure to exist as super users (upstream initUser; an existing user is kept as it is).
A file whose content is not a valid user or ACL is a start-up error naming the file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
import trio

from rocketrio.actors.auth.config import parse_credentials, parse_init_user
from rocketrio.actors.auth.metadata import AuthMetadata
from rocketrio.actors.auth.model import (
    Acl,
    AuthDataError,
    User,
    acl_from_info,
    acl_to_info,
    user_from_info,
    user_to_info,
)
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.store.view import RunBlocking
from rocketrio.actors.broker.tables.config_file import ConfigFile
from rocketrio.actors.broker.tables.json_table import JsonFileTable, config_path
from rocketrio.actors.observe import events
from rocketrio.protocol.auth_bodies import AuthAclsFile, AuthUsersFile
from rocketrio.protocol.bodies import DataVersion
from rocketrio.storage.config_store import ConfigFileError
from rocketrio.storage.fs import OS_FS, FileSystem

USERS_FILE = "users.json"
ACLS_FILE = "acls.json"


class AuthTable(AuthMetadata, JsonFileTable):
    """The broker's users and ACLs (`AuthMetadata`) with their two files, users.json and
    acls.json: loaded at start, both written durably before a change is answered."""

    def __init__(
        self,
        config: BrokerConfig,
        now_ms: Callable[[], int],
        *,
        run_blocking: RunBlocking = trio.to_thread.run_sync,
        fs: FileSystem = OS_FS,
    ) -> None:
        super().__init__()
        self.config = config
        self.now_ms = now_ms
        self.log = structlog.get_logger("broker").bind(broker=config.brokerName, actor="auth")
        self.version = DataVersion()
        root = config.storePathRootDir
        self.users_file = ConfigFile(
            config_path(root, USERS_FILE), AuthUsersFile, self._users_snapshot, run_blocking, fs=fs
        )
        self.acls_file = ConfigFile(
            config_path(root, ACLS_FILE), AuthAclsFile, self._acls_snapshot, run_blocking, fs=fs
        )

    def _users_snapshot(self) -> AuthUsersFile:
        return AuthUsersFile([user_to_info(u) for _, u in sorted(self.users.items())], self.version)

    def _acls_snapshot(self) -> AuthAclsFile:
        return AuthAclsFile([acl_to_info(a) for _, a in sorted(self.acls.items())], self.version)

    def files(self) -> tuple[ConfigFile[Any], ...]:
        return (self.users_file, self.acls_file)

    def _adopt_files(self, values: tuple[Any, ...]) -> None:
        users, acls = values
        try:
            self.users = (
                {u.username: u for u in (user_from_info(i) for i in users.users)} if users else {}
            )
        except AuthDataError as e:
            raise ConfigFileError(f"config file {self.users_file.path}: {e}") from None
        try:
            self.acls = (
                {a.subject: a for a in (acl_from_info(i) for i in acls.acls)} if acls else {}
            )
        except AuthDataError as e:
            raise ConfigFileError(f"config file {self.acls_file.path}: {e}") from None
        if users is not None:
            self.version = users.dataVersion

    async def load_file(self) -> bool:
        """Read both files, then create the configured super users (written at once)."""
        from_backup = await super().load_file()
        if self.ensure_configured_users():
            await self.persist()
        return from_backup

    def ensure_configured_users(self) -> list[str]:
        """initAuthenticationUser and the inner client credentials exist (as super users)."""
        created = []
        init = parse_init_user(self.config.initAuthenticationUser)
        if init is not None and self.init_user(*init):
            created.append(init[0])
        inner = parse_credentials(self.config.innerClientAuthenticationCredentials)
        if inner is not None and self.init_user(inner.access_key, inner.secret_key):
            created.append(inner.access_key)
        for name in created:
            events.emit(self.log, events.AuthUserInitialized(user=name))
        return created

    async def persist(self) -> None:
        """Bump the version and write both files; returns when they are durable."""
        self.version = self.version.next_version(self.now_ms())
        await super().persist()

    def adopt(self, users: list[User], acls: list[Acl]) -> bool:
        """A slave takes its master's tables (keeping its own configured users); True when
        anything changed."""
        before = (dict(self.users), dict(self.acls))
        self.replace(users, acls)
        self.ensure_configured_users()
        return (self.users, self.acls) != before
