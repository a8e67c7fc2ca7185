"""The broker's ACL 2.0 admin calls, request codes 3001-3010 (upstream AdminBrokerProcessor's
createUser ... listAcl): each takes the typed header and body, applies the `AuthTable`'s rules,
persists a change before answering (SUCCESS means on disk), and returns a typed outcome.

``caller`` is the request's AccessKey (None when not signed: authentication is off), for the
rule that only a super user may create, change or delete a super user.
"""

from __future__ import annotations

import structlog

from rocketrio.actors.auth.metadata import AuthFailed
from rocketrio.actors.auth.model import acl_to_info, user_to_info
from rocketrio.actors.broker.dispatch.outcomes import DONE, Done, Refusal
from rocketrio.actors.broker.tables.auth import AuthTable
from rocketrio.actors.observe import events
from rocketrio.protocol.auth_bodies import (
    AclInfo,
    CreateAclRequestHeader,
    DeleteAclRequestHeader,
    DeleteUserRequestHeader,
    GetAclRequestHeader,
    GetUserRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserInfo,
)
from rocketrio.protocol.codes import ResponseCode

log = structlog.get_logger("broker.auth")


def _refusal(failed: AuthFailed) -> Refusal:
    return Refusal(failed.code, failed.remark)


class AuthProcessor:
    def __init__(self, table: AuthTable) -> None:
        self.table = table

    async def _apply(self, failed: AuthFailed | None, ev: events.LogEvent) -> Done | Refusal:
        if failed is not None:
            return _refusal(failed)
        await self.table.persist()
        events.emit(self.table.log, ev)
        return DONE

    # ------------------------------------------------------------------ users

    async def create_user(
        self, username: str | None, body: UserInfo | None, caller: str | None
    ) -> Done | Refusal:
        return await self._put_user(username, body, caller, create=True)

    async def update_user(
        self, username: str | None, body: UserInfo | None, caller: str | None
    ) -> Done | Refusal:
        return await self._put_user(username, body, caller, create=False)

    async def _put_user(
        self, username: str | None, body: UserInfo | None, caller: str | None, *, create: bool
    ) -> Done | Refusal:
        if not username:
            return Refusal(ResponseCode.INVALID_PARAMETER, "The username is blank")
        info = body or UserInfo()
        info.username = username  # the header names the user, as upstream
        if create:
            failed = self.table.create_user(info, caller)
            return await self._apply(failed, events.AuthUserCreated(user=username, by=caller))
        failed = self.table.update_user(info, caller)
        return await self._apply(failed, events.AuthUserUpdated(user=username, by=caller))

    async def delete_user(self, h: DeleteUserRequestHeader, caller: str | None) -> Done | Refusal:
        failed = self.table.delete_user(h.username, caller)
        return await self._apply(failed, events.AuthUserDeleted(user=h.username, by=caller))

    def get_user(self, h: GetUserRequestHeader) -> UserInfo | Refusal | None:
        if not h.username or not h.username.strip():
            return Refusal(ResponseCode.INVALID_PARAMETER, "The username is blank")
        user = self.table.user(h.username)
        return None if user is None else user_to_info(user)

    def list_users(self, h: ListUsersRequestHeader) -> list[UserInfo]:
        return [user_to_info(u) for u in self.table.list_users(h.filter)]

    # ------------------------------------------------------------------ ACLs

    async def put_acl(
        self, h: CreateAclRequestHeader, body: AclInfo | None, caller: str | None
    ) -> Done | Refusal:
        """createAcl and updateAcl (the same rule upstream)."""
        if body is None or not body.policies:
            return Refusal(ResponseCode.NO_PERMISSION, "The body of acl is null")
        failed = self.table.put_acl(body, h.subject)
        return await self._apply(
            failed, events.AuthAclUpdated(subject=body.subject or h.subject, by=caller)
        )

    async def delete_acl(self, h: DeleteAclRequestHeader, caller: str | None) -> Done | Refusal:
        failed = self.table.delete_acl(h.subject, h.policyType, h.resource)
        return await self._apply(
            failed, events.AuthAclDeleted(subject=h.subject, resource=h.resource, by=caller)
        )

    def get_acl(self, h: GetAclRequestHeader) -> AclInfo | Refusal | None:
        acl = self.table.get_acl(h.subject)
        if isinstance(acl, AuthFailed):
            return _refusal(acl)
        return None if acl is None else acl_to_info(acl)

    def list_acls(self, h: ListAclsRequestHeader) -> list[AclInfo]:
        return [acl_to_info(a) for a in self.table.list_acls(h.subjectFilter, h.resourceFilter)]
