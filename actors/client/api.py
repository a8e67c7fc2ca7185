"""Typed remoting calls of the clients (upstream MQClientAPIImpl).

`MQClientAPI` wraps a `RemotingClient`: every method builds a typed header, invokes, checks the
response code and returns a typed value, raising `MQBrokerError` (a failure answer) or
`RemotingError` (no answer). Name server calls try every configured name server in turn,
starting with the last one that answered, so one dead name server costs one failed connect,
not every call.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from rocketrio.actors.client.errors import MQBrokerError, TopicRouteNotFound
from rocketrio.actors.client.remoting import ClientRemoting
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.protocol.bodies import (
    ClusterInfo,
    ConsumerIdList,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    TopicRouteData,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    PULL_FLAG_LITE_PULL,
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketrio.protocol.message import MessageExt, decode_all
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext, to_json


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@attrs.define(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    body: bytes
    # static topics: logic - physical offset of the records (upstream OffsetDelta)
    offset_delta: int | None = None

    def messages(self) -> list[MessageExt]:
        """The pulled messages (decoded on demand; compressed bodies are inflated), with
        logic queue offsets when the broker sent an OffsetDelta."""
        if not self.body:
            return []
        msgs = decode_all(self.body, decompress_body=True)
        if self.offset_delta:
            for m in msgs:
                m.queue_offset += self.offset_delta
        return msgs


def request(code: int, header: Any = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(
        code=code, ext_fields=to_ext(header) if header is not None else {}, body=body
    )


def check(resp: RemotingCommand, addr: str, ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> None:
    if resp.code not in ok:
        raise MQBrokerError(resp.code, resp.remark, addr)


def parse_pull_response(resp: RemotingCommand, addr: str) -> PullResult:
    status = _PULL_STATUS.get(resp.code)  # type: ignore[call-overload]
    if status is None:
        raise MQBrokerError(resp.code, resp.remark, addr)
    ext = resp.ext_fields
    try:  # once per pull: read the four fields directly, not through the converter
        broker_id = int(ext["suggestWhichBrokerId"])
        next_begin = int(ext["nextBeginOffset"])
        min_offset = int(ext["minOffset"])
        max_offset = int(ext["maxOffset"])
    except (KeyError, ValueError, TypeError):
        h = from_ext(PullMessageResponseHeader, ext)  # raises HeaderError naming the field
        broker_id, next_begin, min_offset = h.suggestWhichBrokerId, h.nextBeginOffset, h.minOffset
        max_offset = h.maxOffset
    body = resp.body if status is PullStatus.FOUND else b""
    delta = ext.get("offsetDelta")
    return PullResult(
        status, next_begin, min_offset, max_offset, broker_id, body, int(delta) if delta else None
    )


class MQClientAPI:
    """Typed calls to name servers and brokers over one RemotingClient."""

    def __init__(
        self, remoting: RemotingClient | ClientRemoting, namesrv_addrs: list[str], timeout_s: float
    ) -> None:
        if not namesrv_addrs:
            raise ValueError("no name server address given (namesrvAddr)")
        self.remoting = remoting
        self.namesrv_addrs = list(namesrv_addrs)
        self.timeout_s = timeout_s
        self._ns_index = 0

    # -- plumbing
    async def call(
        self,
        addr: str,
        code: int,
        header: Any = None,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        resp = await self.remoting.invoke(
            addr, request(code, header, body), self.timeout_s if timeout_s is None else timeout_s
        )
        check(resp, addr, ok)
        return resp

    async def call_namesrv(
        self,
        code: int,
        header: Any = None,
        body: bytes = b"",
        *,
        ok: tuple[int, ...] = (ResponseCode.SUCCESS,),
        addr: str | None = None,
    ) -> RemotingCommand:
        """Ask one name server (``addr``) or the first that answers."""
        if addr is not None:
            return await self.call(addr, code, header, body, ok=ok)
        errors: list[str] = []
        n = len(self.namesrv_addrs)
        for i in range(n):
            idx = (self._ns_index + i) % n
            ns = self.namesrv_addrs[idx]
            try:
                resp = await self.remoting.invoke(ns, request(code, header, body), self.timeout_s)
            except RemotingError as e:
                errors.append(f"{ns}: {e}")
                continue
            self._ns_index = idx
            check(resp, ns, ok)
            return resp
        raise RemotingError("no name server answered: " + "; ".join(errors))

    # -- name server
    async def get_route(self, topic: str) -> TopicRouteData:
        resp = await self.call_namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            GetRouteInfoRequestHeader(topic=topic, acceptStandardJsonOnly=True),
            ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST),
        )
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicRouteNotFound(topic, resp.remark or "")
        return from_json(TopicRouteData, resp.body)

    async def get_cluster_info(self) -> ClusterInfo:
        resp = await self.call_namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        return from_json(ClusterInfo, resp.body)

    # -- consumers
    async def pull(
        self, addr: str, header: PullMessageRequestHeader, timeout_s: float
    ) -> PullResult:
        # a lite pull consumer's pulls carry the lite-pull flag and go as LITE_PULL_MESSAGE
        lite = header.sysFlag & PULL_FLAG_LITE_PULL
        code = RequestCode.LITE_PULL_MESSAGE if lite else RequestCode.PULL_MESSAGE
        resp = await self.remoting.invoke(addr, request(code, header), timeout_s)
        return parse_pull_response(resp, addr)

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue) -> int:
        """The group's stored offset, or -1 when the broker has none (QUERY_NOT_FOUND)."""
        resp = await self.call(
            addr,
            RequestCode.QUERY_CONSUMER_OFFSET,
            QueryConsumerOffsetRequestHeader(group, mq.topic, mq.queueId),
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        return from_ext(OffsetResponseHeader, resp.ext_fields).offset

    async def update_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, offset: int
    ) -> None:
        await self.call(
            addr,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queueId, offset),
        )

    async def get_max_offset(self, addr: str, mq: MessageQueue) -> int:
        resp = await self.call(
            addr, RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(mq.topic, mq.queueId)
        )
        return from_ext(OffsetResponseHeader, resp.ext_fields).offset

    async def get_min_offset(self, addr: str, mq: MessageQueue) -> int:
        resp = await self.call(
            addr, RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(mq.topic, mq.queueId)
        )
        return from_ext(OffsetResponseHeader, resp.ext_fields).offset

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int) -> int:
        resp = await self.call(
            addr,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            SearchOffsetRequestHeader(mq.topic, mq.queueId, timestamp_ms),
        )
        return from_ext(OffsetResponseHeader, resp.ext_fields).offset

    async def get_consumer_id_list(self, addr: str, group: str) -> list[str]:
        resp = await self.call(
            addr,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            GetConsumerListByGroupRequestHeader(group),
        )
        if not resp.body:
            return []
        return from_json(ConsumerIdList, resp.body).consumerIdList

    async def send_message_back(
        self,
        addr: str,
        msg: MessageExt,
        group: str,
        delay_level: int,
        max_reconsume_times: int,
        *,
        origin_msg_id: str | None = None,
        stored_topic: str | None = None,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker re-reads the message at its commitlog offset and
        writes it to the group's retry topic (or DLQ after max_reconsume_times).

        ``originTopic`` is the topic the message is stored under (the retry topic for a
        message already retried): the broker fences on it. Upstream's client sends the
        original topic, fails that fence for retried messages and falls back to a normal send.
        """
        await self.call(
            addr,
            RequestCode.CONSUMER_SEND_MSG_BACK,
            ConsumerSendMsgBackRequestHeader(
                offset=msg.commitlog_offset,
                group=group,
                delayLevel=delay_level,
                originMsgId=origin_msg_id or msg.msg_id,
                originTopic=stored_topic or msg.topic,
                unitMode=False,
                maxReconsumeTimes=max_reconsume_times,
            ),
        )

    async def lock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: list[MessageQueue]
    ) -> list[MessageQueue]:
        """LOCK_BATCH_MQ: lock (or renew) the queues for an orderly consumer; returns the
        queues the broker granted (lockOKMQSet)."""
        body = to_json(LockBatchRequestBody(group, client_id, False, mqs))
        resp = await self.call(addr, RequestCode.LOCK_BATCH_MQ, body=body)
        if not resp.body:
            return []
        return from_json(LockBatchResponseBody, resp.body).lockOKMQSet

    async def unlock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: list[MessageQueue]
    ) -> None:
        """UNLOCK_BATCH_MQ: give the queues' locks back."""
        body = to_json(LockBatchRequestBody(group, client_id, False, mqs))
        await self.call(addr, RequestCode.UNLOCK_BATCH_MQ, body=body)

    # -- clients
    async def send_heartbeat(self, addr: str, data: HeartbeatData) -> None:
        await self.call(addr, RequestCode.HEART_BEAT, body=to_json(data))

    async def unregister_client(
        self, addr: str, client_id: str, producer_group: str | None, consumer_group: str | None
    ) -> None:
        await self.call(
            addr,
            RequestCode.UNREGISTER_CLIENT,
            UnregisterClientRequestHeader(client_id, producer_group, consumer_group),
        )
