"""Strict queue locks (RIP-32 lock quorum, SPEC A5): with lockInStrictMode, a LOCK_BATCH_MQ
counts a queue as locked only when a quorum of the broker group holds the lock for the client.

Why: while a slave acts as master, an orderly consumer locks its queues there; when the master
returns, another consumer may lock the same queue on the master before the first one's lock
expires, and both consume it: order is lost. Requiring a quorum of the group (upstream's rule,
``totalReplicas / 2 + 1``: both members with 2 replicas) means at most one client holds a queue
across the switch; the price is that ordered consumption of the group waits while fewer than a
quorum of its members are alive (lockInStrictMode=false keeps upstream's default: any one
member's lock counts).

`quorum_of` and `settle` are pure. `QuorumLocker.lock_batch` (the shell): lock here, ask the
other live members (from the member-group poll) to lock the won queues with
``onlyThisBroker=true`` (1 s each, 2 s in all, as upstream), keep the queues that reached the
quorum, and, unlike upstream, release the partial ones here and on every member that granted
them, so a failed strict lock leaks nothing that would block the next client.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Protocol

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.answers import answer_json
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError, RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import LockBatchRequestBody, LockBatchResponseBody, MessageQueue
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_json, to_json

MEMBER_TIMEOUT_S = 1.0  # upstream: 1 s per member
ALL_TIMEOUT_S = 2.0  # upstream: 2 s for all of them


def quorum_of(total_replicas: int) -> int:
    return total_replicas // 2 + 1


def strict(config: BrokerConfig, only_this_broker: bool) -> bool:
    """Whether a lock request needs the quorum (upstream lockBatchMQ's first test)."""
    return config.lockInStrictMode and not only_this_broker and quorum_of(config.totalReplicas) > 1


def settle(
    local: Iterable[MessageQueue], remote: Iterable[Iterable[MessageQueue]], quorum: int
) -> tuple[list[MessageQueue], list[MessageQueue]]:
    """(queues held by a quorum, queues held by fewer: to release) of one strict request."""
    won = list(local)
    count = Counter(won)
    for granted in remote:
        count.update(mq for mq in set(granted) if mq in count)
    kept = [mq for mq in won if count[mq] >= quorum]
    return kept, [mq for mq in won if count[mq] < quorum]


class LocalLocks(Protocol):
    """This broker's own queue locks (clients/processor.py ClientProcessor)."""

    def lock_batch(self, req: LockBatchRequestBody) -> LockBatchResponseBody: ...

    def unlock_batch(self, req: LockBatchRequestBody) -> object: ...


def request(code: int, body: bytes) -> RemotingCommand:
    return RemotingCommand(code=code, body=body)


class QuorumLocker:
    """LOCK_BATCH_MQ under lockInStrictMode (module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        processor: LocalLocks,
        *,
        members: Callable[[], dict[int, str]],
        client: Callable[[], RemotingClient | None],
    ) -> None:
        self.config = config
        self.processor = processor
        self.members = members
        self.client = client
        self.log = structlog.get_logger("broker").bind(actor="lock_quorum")

    def wrap(self, plain: Handlers) -> Handlers:
        """Replace LOCK_BATCH_MQ while lockInStrictMode (read at each request)."""
        plain_lock = plain[RequestCode.LOCK_BATCH_MQ]

        async def lock(ctx: RequestContext) -> RemotingCommand:
            try:
                req = from_json(LockBatchRequestBody, ctx.cmd.body)
            except HeaderError as e:
                return ctx.cmd.make_response(ResponseCode.INVALID_PARAMETER, str(e))
            if not strict(self.config, req.onlyThisBroker):
                return await plain_lock(ctx)
            return answer_json(ctx.cmd, await self.lock_batch(req))

        return {RequestCode.LOCK_BATCH_MQ: lock}

    def _others(self) -> dict[int, str]:
        me = self.config.brokerId
        return {i: a for i, a in self.members().items() if i != me}

    async def lock_batch(self, req: LockBatchRequestBody) -> LockBatchResponseBody:
        local = self.processor.lock_batch(req).lockOKMQSet
        quorum = quorum_of(self.config.totalReplicas)
        granted: dict[str, list[MessageQueue]] = {}
        client = self.client()
        if local and client is not None:
            ask = LockBatchRequestBody(req.consumerGroup, req.clientId, True, list(local))
            with trio.move_on_after(ALL_TIMEOUT_S):
                async with trio.open_nursery() as n:
                    for addr in self._others().values():
                        n.start_soon(self._ask, client, addr, ask, granted)
        kept, partial = settle(local, granted.values(), quorum)
        if partial:
            await self._release(req, partial, granted, quorum)
        return LockBatchResponseBody(kept)

    async def _ask(
        self,
        client: RemotingClient,
        addr: str,
        ask: LockBatchRequestBody,
        granted: dict[str, list[MessageQueue]],
    ) -> None:
        cmd = request(RequestCode.LOCK_BATCH_MQ, to_json(ask))
        try:
            resp = await client.invoke(addr, cmd, MEMBER_TIMEOUT_S)
            if resp.code == ResponseCode.SUCCESS and resp.body:
                granted[addr] = from_json(LockBatchResponseBody, resp.body).lockOKMQSet
        except (RemotingError, HeaderError):
            return  # that member does not count

    async def _release(
        self,
        req: LockBatchRequestBody,
        partial: list[MessageQueue],
        granted: dict[str, list[MessageQueue]],
        quorum: int,
    ) -> None:
        """Unlock the queues that missed the quorum here and where they were granted."""
        self.processor.unlock_batch(
            LockBatchRequestBody(req.consumerGroup, req.clientId, True, partial)
        )
        events.emit(
            self.log,
            events.StrictLockPartial(group=req.consumerGroup, quorum=quorum, released=len(partial)),
        )
        client = self.client()
        if client is None:
            return
        with trio.move_on_after(ALL_TIMEOUT_S):
            async with trio.open_nursery() as n:
                for addr, mqs in granted.items():
                    mine = [mq for mq in mqs if mq in set(partial)]
                    if mine:
                        body = LockBatchRequestBody(req.consumerGroup, req.clientId, True, mine)
                        cmd = request(RequestCode.UNLOCK_BATCH_MQ, to_json(body))
                        n.start_soon(self._unlock_one, client, addr, cmd)

    async def _unlock_one(self, client: RemotingClient, addr: str, cmd: RemotingCommand) -> None:
        try:
            await client.invoke(addr, cmd, MEMBER_TIMEOUT_S)
        except RemotingError:
            return  # that lock expires after rebalanceLockMaxLiveTime
