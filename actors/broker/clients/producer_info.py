"""GET_ALL_PRODUCER_INFO (328): every producer connected to this broker, by group (upstream
AdminBrokerProcessor.getAllProducerInfo, ProducerManager.getProducerTable; `mqadmin producer`).

`producer_table` is pure: the producer manager's members as ProducerInfo, each group's in the
order they joined. The manager keeps a member's last heartbeat on Trio's clock; the answer gives
it as epoch ms (the wall clock now, less how long ago that was).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from rocketrio.actors.broker.clients.client_manager import ProducerManager
from rocketrio.actors.broker.dispatch.table import Handler
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol import fastjson
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.producer_info import ProducerInfo, ProducerTableInfo
from rocketrio.protocol.remoting import RemotingCommand


def producer_table(producers: ProducerManager, now_s: float, wall_ms: int) -> ProducerTableInfo:
    """The body of 328 at Trio time ``now_s`` and wall-clock ``wall_ms``."""
    return ProducerTableInfo(
        {
            group: [
                ProducerInfo(
                    clientId=info.client_id,
                    remoteIP=f"/{info.addr}" if info.addr else "",
                    language=info.language,
                    version=info.version,
                    lastUpdateTimestamp=wall_ms - round((now_s - info.last_update_s) * 1000),
                )
                for info in members.values()
            ]
            for group, members in producers.groups.items()
        }
    )


def producer_info_handlers(
    producers: ProducerManager, now_ms: Callable[[], int]
) -> dict[int, Handler]:
    async def all_producer_info(ctx: RequestContext) -> RemotingCommand:
        table = producer_table(producers, trio.current_time(), now_ms())
        return ctx.cmd.make_response(ResponseCode.SUCCESS, body=fastjson.encode(table))

    return {RequestCode.GET_ALL_PRODUCER_INFO: all_producer_info}
