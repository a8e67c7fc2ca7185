"""A scripted master for the slave's metadata synchronisation (SlaveSynchronize) tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.protocol.bodies import (
    ConsumerOffsetSerializeWrapper,
    DataVersion,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_json

OLD = "10.0.0.1:10911"


GROUP_KEY = "T@G"


async def inline(fn: Callable[[], Any]) -> Any:
    return fn()


class ScriptedMaster:
    """Answers the three GET_ALL_* calls with a fixed table; ``before_answer`` runs (and may
    block) between receiving a request and answering it, as a hung process would."""

    def __init__(self, queues: int, offset: int) -> None:
        self.topics = TopicConfigSerializeWrapper(
            topicConfigTable={"T": TopicConfig("T", queues, queues)},
            dataVersion=DataVersion(1, 1000, 7),
        )
        self.offsets = ConsumerOffsetSerializeWrapper(offsetTable={GROUP_KEY: {0: offset}})
        self.before_answer: Callable[[int], Awaitable[None]] | None = None
        self.calls: list[int] = []

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        assert addr == OLD
        self.calls.append(cmd.code)
        if self.before_answer is not None:
            await self.before_answer(cmd.code)
        body = {
            RequestCode.GET_ALL_TOPIC_CONFIG: self.topics,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: SubscriptionGroupWrapper(),
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.offsets,
        }[cmd.code]
        return RemotingCommand(ResponseCode.SUCCESS, body=to_json(body))


def tables(tmp_path: Path) -> tuple[TopicTable, GroupTable, OffsetTable]:
    config = BrokerConfig(storePathRootDir=str(tmp_path))
    now = lambda: 1_700_000_000_000  # noqa: E731
    return (
        TopicTable(config, now, run_blocking=inline),
        GroupTable(config, now, run_blocking=inline),
        OffsetTable(config, now, run_blocking=inline),
    )
