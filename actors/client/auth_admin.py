"""The ACL 2.0 admin API behind ``rocketrio admin createUser ... listAcl`` (upstream
DefaultMQAdminExt's createUser ... listAcl over request codes 3001-3010).

Every call goes to one broker (``-b host:port``) or to every broker of a cluster (``-c name``:
masters and slaves, as upstream's mqadmin; slaves would also copy the master's tables through
slave sync). Writes return the addresses written; reads return ``{addr: result}``. A broker
that refuses raises `MQBrokerError` naming it (code and remark, e.g. NO_PERMISSION with the
missing right); an unknown cluster, or a user / ACL no broker has, is `NotFound`; bad input
(an unknown action, a malformed resource) is `UsageError`, before anything is sent. Requests
are signed by the `MQAdmin`'s request hook (--access-key/--secret-key).
"""

from __future__ import annotations

from typing import Any

from rocketrio.actors.auth.model import AuthDataError, Decision, Resource, parse_actions
from rocketrio.actors.client.admin import MQAdmin, broker_addrs_of
from rocketrio.actors.client.errors import MQBrokerError, NotFound, UsageError
from rocketrio.protocol.auth_bodies import (
    AclInfo,
    CreateAclRequestHeader,
    CreateUserRequestHeader,
    DeleteAclRequestHeader,
    DeleteUserRequestHeader,
    GetAclRequestHeader,
    GetUserRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    PolicyEntryInfo,
    PolicyInfo,
    UpdateAclRequestHeader,
    UpdateUserRequestHeader,
    UserInfo,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_ext, to_json


def acl_body(
    subject: str,
    resources: list[str],
    actions: list[str],
    source_ips: list[str] | None = None,
    decision: str = "Allow",
) -> AclInfo:
    """An AclInfo with one Custom policy entry per resource (upstream AclInfo.of); checked
    here so a typo is reported before anything is sent. ``admin`` = the admin actions."""
    try:
        for r in resources:
            Resource.parse(r)
        names = [a.value for a in parse_actions(actions, allow_admin=True)]
        Decision.parse(decision, "decision")
    except AuthDataError as e:
        raise UsageError(str(e)) from None
    if not resources or not names:
        raise UsageError("an ACL needs at least one resource and one action")
    entries = [PolicyEntryInfo(r, names, source_ips or None, decision) for r in resources]
    return AclInfo(subject, [PolicyInfo("Custom", entries)])


class AuthAdmin:
    def __init__(self, admin: MQAdmin) -> None:
        self.admin = admin

    async def brokers(self, broker: str | None, cluster: str | None) -> list[str]:
        """``broker`` alone, or every broker (every brokerId) of ``cluster``."""
        if broker:
            return [broker]
        if not cluster:
            raise UsageError("give a broker (-b host:port) or a cluster (-c name)")
        addrs = broker_addrs_of(await self.admin.cluster_info(), cluster)
        if not addrs:
            raise NotFound(f"cluster {cluster} has no live broker")
        return addrs

    async def _call(self, addr: str, code: int, header: Any, body: Any = None) -> bytes:
        cmd = RemotingCommand(
            code, ext_fields=to_ext(header), body=b"" if body is None else to_json(body)
        )
        resp = await self.admin.remoting.invoke(addr, cmd, self.admin.api.timeout_s)
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        return resp.body

    async def _each(self, addrs: list[str], code: int, header: Any, body: Any = None) -> list[str]:
        for addr in addrs:
            await self._call(addr, code, header, body)
        return addrs

    # ------------------------------------------------------------------ users

    async def create_user(self, addrs: list[str], info: UserInfo) -> list[str]:
        h = CreateUserRequestHeader(info.username)
        return await self._each(addrs, RequestCode.AUTH_CREATE_USER, h, info)

    async def update_user(self, addrs: list[str], info: UserInfo) -> list[str]:
        h = UpdateUserRequestHeader(info.username)
        return await self._each(addrs, RequestCode.AUTH_UPDATE_USER, h, info)

    async def delete_user(self, addrs: list[str], username: str) -> list[str]:
        h = DeleteUserRequestHeader(username)
        return await self._each(addrs, RequestCode.AUTH_DELETE_USER, h)

    async def get_user(self, addrs: list[str], username: str) -> dict[str, UserInfo | None]:
        out: dict[str, UserInfo | None] = {}
        for addr in addrs:
            raw = await self._call(addr, RequestCode.AUTH_GET_USER, GetUserRequestHeader(username))
            out[addr] = from_json(UserInfo, raw) if raw else None
        if all(v is None for v in out.values()):
            raise NotFound(f"user {username} not found on {', '.join(addrs)}")
        return out

    async def list_users(self, addrs: list[str], filter_: str | None) -> dict[str, list[UserInfo]]:
        out: dict[str, list[UserInfo]] = {}
        for addr in addrs:
            raw = await self._call(
                addr, RequestCode.AUTH_LIST_USER, ListUsersRequestHeader(filter_)
            )
            out[addr] = from_json(list[UserInfo], raw) if raw else []
        return out

    # ------------------------------------------------------------------ ACLs

    async def create_acl(self, addrs: list[str], acl: AclInfo) -> list[str]:
        h = CreateAclRequestHeader(acl.subject)
        return await self._each(addrs, RequestCode.AUTH_CREATE_ACL, h, acl)

    async def update_acl(self, addrs: list[str], acl: AclInfo) -> list[str]:
        h = UpdateAclRequestHeader(acl.subject)
        return await self._each(addrs, RequestCode.AUTH_UPDATE_ACL, h, acl)

    async def delete_acl(
        self, addrs: list[str], subject: str, resource: str | None, policy_type: str | None = None
    ) -> list[str]:
        h = DeleteAclRequestHeader(subject, policy_type, resource)
        return await self._each(addrs, RequestCode.AUTH_DELETE_ACL, h)

    async def get_acl(self, addrs: list[str], subject: str) -> dict[str, AclInfo | None]:
        out: dict[str, AclInfo | None] = {}
        for addr in addrs:
            raw = await self._call(addr, RequestCode.AUTH_GET_ACL, GetAclRequestHeader(subject))
            out[addr] = from_json(AclInfo, raw) if raw else None
        if all(v is None for v in out.values()):
            raise NotFound(f"no acl for {subject} on {', '.join(addrs)}")
        return out

    async def list_acls(
        self, addrs: list[str], subject_filter: str | None, resource_filter: str | None
    ) -> dict[str, list[AclInfo]]:
        out: dict[str, list[AclInfo]] = {}
        h = ListAclsRequestHeader(subject_filter, resource_filter)
        for addr in addrs:
            raw = await self._call(addr, RequestCode.AUTH_LIST_ACL, h)
            out[addr] = from_json(list[AclInfo], raw) if raw else []
        return out
