"""The container's request codes (upstream BrokerContainerProcessor): ADD_BROKER (902) starts
the broker of a config file on the container's host, REMOVE_BROKER (903) stops one gracefully,
GET_BROKER_CONFIG (26) answers the container's config and its members (`status_text`),
UPDATE_BROKER_CONFIG (25) changes the container's own keys (live_config.py: its refusals are the
kernel's live-update ones, NO_PERMISSION for a black-listed key).

Every refusal is SYSTEM_ERROR with the reason as remark, except a REMOVE_BROKER of a broker not
here, which is BROKER_NOT_EXIST (upstream's codes); a malformed header is INVALID_PARAMETER.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketrio.actors.broker.container.registry import BrokerIdentity, ContainerError, UnknownBroker
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.container_headers import AddBrokerRequestHeader, RemoveBrokerRequestHeader
from rocketrio.protocol.headers import GetBrokerConfigResponseHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, to_ext, to_json

if TYPE_CHECKING:
    from rocketrio.actors.broker.container.container import BrokerContainer


def container_handlers(container: BrokerContainer) -> Handlers:
    log = container.log

    def refused(ctx: RequestContext, request: str, code: int, error: str) -> RemotingCommand:
        events.emit(log, events.ContainerRequestRefused(request=request, error=error))
        return ctx.cmd.make_response(code, error)

    async def add_broker(ctx: RequestContext) -> RemotingCommand:
        try:
            h = from_ext(AddBrokerRequestHeader, ctx.cmd.ext_fields)
        except HeaderError as e:
            return refused(ctx, "add_broker", ResponseCode.INVALID_PARAMETER, str(e))
        try:
            await container.add_broker(h.configPath or "")
        except ContainerError as e:
            return refused(ctx, "add_broker", ResponseCode.SYSTEM_ERROR, str(e))
        return ctx.cmd.make_response(ResponseCode.SUCCESS)

    async def remove_broker(ctx: RequestContext) -> RemotingCommand:
        try:
            h = from_ext(RemoveBrokerRequestHeader, ctx.cmd.ext_fields)
        except HeaderError as e:
            return refused(ctx, "remove_broker", ResponseCode.INVALID_PARAMETER, str(e))
        identity = BrokerIdentity(h.brokerClusterName, h.brokerName, h.brokerId)
        try:
            await container.remove_broker(identity)
        except UnknownBroker as e:
            return refused(ctx, "remove_broker", ResponseCode.BROKER_NOT_EXIST, str(e))
        return ctx.cmd.make_response(ResponseCode.SUCCESS)

    async def get_config(ctx: RequestContext) -> RemotingCommand:
        header = GetBrokerConfigResponseHeader(version=to_json(container.version).decode())
        body = container.status_text().encode()
        return ctx.cmd.make_response(ResponseCode.SUCCESS, ext_fields=to_ext(header), body=body)

    return {
        RequestCode.ADD_BROKER: add_broker,
        RequestCode.REMOVE_BROKER: remove_broker,
        RequestCode.GET_BROKER_CONFIG: get_config,
        RequestCode.UPDATE_BROKER_CONFIG: container.updater.handle,
    }
