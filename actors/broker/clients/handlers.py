"""The remoting side of clients: HEART_BEAT, UNREGISTER_CLIENT, the consumer and producer lists,
queue locks and consumer offsets, plus the connection as a client's channel.

A remoting `Connection` is a client's channel: its closing is reported to the client processor
(`on_connect`), its id is cached on it at heartbeat time, and NOTIFY_CONSUMER_IDS_CHANGED
(oneway) is pushed to a group's members through it (`RemotingNotifier`).
"""

from __future__ import annotations

from collections.abc import Hashable

from rocketrio.actors.broker.clients.processor import ClientProcessor
from rocketrio.actors.broker.dispatch.answers import (
    answer_done,
    answer_json,
    answer_offset,
    on_body,
    on_ext,
    on_no_args,
)
from rocketrio.actors.broker.dispatch.outcomes import Done
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.kernel.remoting import Connection, RequestContext
from rocketrio.protocol.bodies import HeartbeatData, LockBatchRequestBody
from rocketrio.protocol.codes import RPC_ONEWAY, RequestCode
from rocketrio.protocol.headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetProducerConnectionListRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext


class RemotingNotifier:
    """NOTIFY_CONSUMER_IDS_CHANGED (oneway) to a group's members (their connections)."""

    def __init__(self) -> None:
        self._opaque = 0

    def consumer_ids_changed(self, group: str, channels: list[Hashable]) -> None:
        ext = to_ext(NotifyConsumerIdsChangedRequestHeader(group))
        for conn in channels:
            assert isinstance(conn, Connection)
            self._opaque += 1
            cmd = RemotingCommand(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                opaque=self._opaque,
                flag=RPC_ONEWAY,
                ext_fields=dict(ext),
            )
            conn.send_nowait(cmd)


def client_handlers(clients: ClientProcessor) -> Handlers:
    """The request codes the clients package serves."""
    c, rc = clients, RequestCode

    async def heartbeat(ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        data = from_json(HeartbeatData, cmd.body)
        outcome = c.heartbeat(data, ctx.conn, cmd.language, cmd.version, ctx.conn.remote)
        if isinstance(outcome, Done):
            ctx.conn.attrs["client_id"] = data.clientID
        return answer_done(cmd, outcome)

    async def unregister_client(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(UnregisterClientRequestHeader, ctx.cmd.ext_fields)
        return answer_done(ctx.cmd, c.unregister_client(h, ctx.conn))

    return {
        rc.HEART_BEAT: heartbeat,
        rc.UNREGISTER_CLIENT: unregister_client,
        rc.GET_CONSUMER_LIST_BY_GROUP: on_ext(
            GetConsumerListByGroupRequestHeader, c.consumer_list, answer_json
        ),
        rc.GET_CONSUMER_CONNECTION_LIST: on_ext(
            GetConsumerConnectionListRequestHeader, c.consumer_connections, answer_json
        ),
        rc.GET_PRODUCER_CONNECTION_LIST: on_ext(
            GetProducerConnectionListRequestHeader, c.producer_connections, answer_json
        ),
        rc.LOCK_BATCH_MQ: on_body(LockBatchRequestBody, c.lock_batch, answer_json),
        rc.UNLOCK_BATCH_MQ: on_body(LockBatchRequestBody, c.unlock_batch, answer_done),
        rc.QUERY_CONSUMER_OFFSET: on_ext(
            QueryConsumerOffsetRequestHeader, c.query_offset, answer_offset
        ),
        rc.UPDATE_CONSUMER_OFFSET: on_ext(
            UpdateConsumerOffsetRequestHeader, c.update_offset, answer_done
        ),
        rc.GET_ALL_CONSUMER_OFFSET: on_no_args(c.all_offsets, answer_json),
    }


def on_connect(clients: ClientProcessor, conn: Connection) -> None:
    """The remoting server's connect hook: a closed connection is a client gone."""
    conn.on_close.append(clients.channel_closed)
