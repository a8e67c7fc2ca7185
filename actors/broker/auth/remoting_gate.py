"""The remoting side of ACL 2.0 on the broker: the gate every request passes before any handler
runs (upstream's AuthenticationPipeline + AuthorizationPipeline), and the handlers of request
codes 3001-3010 (decode the upstream headers and JSON bodies, call `AuthProcessor`, encode).

A refused request is answered NO_PERMISSION with the gate's remark; the refusal is logged as
``auth_refused`` with the request, user and source ip (not the signature).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from rocketrio.actors.auth.config import parse_whitelist
from rocketrio.actors.auth.gate import GateSettings, check_request
from rocketrio.actors.broker.auth.processor import AuthProcessor
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.outcomes import Done, Refusal
from rocketrio.actors.broker.tables.auth import AuthTable
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol.acl_signature import ACCESS_KEY
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
    UpdateAclRequestHeader,
    UpdateUserRequestHeader,
    UserInfo,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode, request_name
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_json

log = structlog.get_logger("broker.auth")

Handler = Callable[[RequestContext], Awaitable[RemotingCommand | None]]


def source_ip(remote: str) -> str:
    """The ip of a connection's peer name (``host:port`` on TCP, ``host`` on the sim net)."""
    host, sep, port = remote.rpartition(":")
    if sep and port.isdigit():
        return host.strip("[]")
    return remote


def gate_settings(config: BrokerConfig) -> GateSettings:
    return GateSettings(
        authentication_enabled=config.authenticationEnabled,
        authorization_enabled=config.authorizationEnabled,
        authentication_whitelist=parse_whitelist(
            config.authenticationWhitelist, "authenticationWhitelist"
        ),
        authorization_whitelist=parse_whitelist(
            config.authorizationWhitelist, "authorizationWhitelist"
        ),
        cluster=config.brokerClusterName,
        node=f"broker {config.brokerName}",
    )


class AuthGate:
    """``gate(ctx)``: None to serve the request, else the NO_PERMISSION answer."""

    def __init__(self, settings: GateSettings, table: AuthTable) -> None:
        self.settings = settings
        self.table = table
        self.refused = 0
        self.refused_by_code: dict[int, int] = {}

    def __call__(self, ctx: RequestContext) -> RemotingCommand | None:
        cmd = ctx.cmd
        ip = source_ip(ctx.conn.remote)
        denied = check_request(cmd, ip, self.settings, self.table.user, self.table.acl)
        if denied is None:
            return None
        self.refused += 1
        self.refused_by_code[cmd.code] = self.refused_by_code.get(cmd.code, 0) + 1
        events.emit(
            log,
            events.AuthRefused(
                code=request_name(cmd.code),
                user=cmd.ext_fields.get(ACCESS_KEY),
                source_ip=ip,
                remark=denied.remark,
            ),
        )
        return cmd.make_response(ResponseCode.NO_PERMISSION, denied.remark)


def _caller(cmd: RemotingCommand) -> str | None:
    return cmd.ext_fields.get(ACCESS_KEY) or None


def _answer(cmd: RemotingCommand, outcome: Any) -> RemotingCommand:
    match outcome:
        case Refusal():
            return cmd.make_response(outcome.code, outcome.remark)
        case Done() | None:
            return cmd.make_response(ResponseCode.SUCCESS)
        case list() if not outcome:
            return cmd.make_response(ResponseCode.SUCCESS)  # upstream sends no body
        case _:
            return cmd.make_response(ResponseCode.SUCCESS, body=to_json(outcome))


def _body(cls: type[Any], cmd: RemotingCommand) -> Any:
    return from_json(cls, cmd.body) if cmd.body else None


def auth_handlers(auth: AuthProcessor) -> dict[int, Handler]:
    """The handlers of request codes 3001-3010."""

    async def create_user(ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(CreateUserRequestHeader, cmd.ext_fields)
        out = await auth.create_user(h.username, _body(UserInfo, cmd), _caller(cmd))
        return _answer(cmd, out)

    async def update_user(ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(UpdateUserRequestHeader, cmd.ext_fields)
        out = await auth.update_user(h.username, _body(UserInfo, cmd), _caller(cmd))
        return _answer(cmd, out)

    async def delete_user(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(DeleteUserRequestHeader, ctx.cmd.ext_fields)
        return _answer(ctx.cmd, await auth.delete_user(h, _caller(ctx.cmd)))

    async def get_user(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(GetUserRequestHeader, ctx.cmd.ext_fields)
        return _answer(ctx.cmd, auth.get_user(h))

    async def list_users(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(ListUsersRequestHeader, ctx.cmd.ext_fields)
        return _answer(ctx.cmd, auth.list_users(h))

    async def put_acl(ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        cls = (
            CreateAclRequestHeader
            if cmd.code == RequestCode.AUTH_CREATE_ACL
            else UpdateAclRequestHeader
        )
        h = from_ext(cls, cmd.ext_fields)
        out = await auth.put_acl(
            CreateAclRequestHeader(h.subject), _body(AclInfo, cmd), _caller(cmd)
        )
        return _answer(cmd, out)

    async def delete_acl(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(DeleteAclRequestHeader, ctx.cmd.ext_fields)
        return _answer(ctx.cmd, await auth.delete_acl(h, _caller(ctx.cmd)))

    async def get_acl(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(GetAclRequestHeader, ctx.cmd.ext_fields)
        return _answer(ctx.cmd, auth.get_acl(h))

    async def list_acls(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(ListAclsRequestHeader, ctx.cmd.ext_fields)
        return _answer(ctx.cmd, auth.list_acls(h))

    rc = RequestCode
    return {
        rc.AUTH_CREATE_USER: create_user,
        rc.AUTH_UPDATE_USER: update_user,
        rc.AUTH_DELETE_USER: delete_user,
        rc.AUTH_GET_USER: get_user,
        rc.AUTH_LIST_USER: list_users,
        rc.AUTH_CREATE_ACL: put_acl,
        rc.AUTH_UPDATE_ACL: put_acl,
        rc.AUTH_DELETE_ACL: delete_acl,
        rc.AUTH_GET_ACL: get_acl,
        rc.AUTH_LIST_ACL: list_acls,
    }
