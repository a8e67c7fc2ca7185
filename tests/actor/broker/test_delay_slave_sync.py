"""SlaveSynchronize copies the master's delayOffset.json (GET_ALL_DELAY_OFFSET) so a promoted
slave's schedule service continues where the master stopped; an answer that arrives after
this broker was promoted is not applied (the stale-answer rule of slave_sync.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.roles.slave_sync import SlaveSynchronize, SyncRefused
from rocketrio.actors.broker.tables.delay_offset import (
    DelayOffsetSerializeWrapper,
    DelayOffsetTable,
)
from rocketrio.protocol.bodies import DataVersion
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_json
from tests.harness.slave_sync import OLD, ScriptedMaster, tables


class MasterWithDelayOffsets(ScriptedMaster):
    def __init__(self, delay: DelayOffsetSerializeWrapper) -> None:
        super().__init__(queues=4, offset=100)
        self.delay = delay

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        if cmd.code != RequestCode.GET_ALL_DELAY_OFFSET:
            return await super().invoke(addr, cmd, timeout)
        self.calls.append(cmd.code)
        if self.before_answer is not None:
            await self.before_answer(cmd.code)
        return RemotingCommand(ResponseCode.SUCCESS, body=to_json(self.delay))


MASTERS = DelayOffsetSerializeWrapper({1: 40, 3: 7}, DataVersion(2, 1000, 5), {12: 9})


async def test_a_slave_adopts_its_masters_delay_offsets(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    topics, groups, offsets = tables(tmp_path)
    delay = DelayOffsetTable(lambda: 0)
    sync = SlaveSynchronize(
        topics=topics, groups=groups, offsets=offsets, master_addr=lambda: OLD, delay_offsets=delay
    )
    await sync.sync_all(MasterWithDelayOffsets(MASTERS), OLD)  # type: ignore[arg-type]
    assert (delay.levels, delay.timers) == ({1: 40, 3: 7}, {12: 9})
    assert delay.dirty  # written to this slave's delayOffset.json by the periodic writer


async def test_delay_offsets_answered_after_promotion_are_not_applied(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    topics, groups, offsets = tables(tmp_path)
    delay = DelayOffsetTable(lambda: 0)
    delay.update_level(1, 55)  # re-put as the new master since the promotion
    following: list[str | None] = [OLD]
    master = MasterWithDelayOffsets(MASTERS)

    async def promoted_meanwhile(code: int) -> None:
        if code == RequestCode.GET_ALL_DELAY_OFFSET:
            following[0] = None
            await trio.sleep(0)

    master.before_answer = promoted_meanwhile
    sync = SlaveSynchronize(
        topics=topics,
        groups=groups,
        offsets=offsets,
        master_addr=lambda: following[0],
        delay_offsets=delay,
    )
    with pytest.raises(SyncRefused, match="no longer this broker's master"):
        await sync.sync_all(master, OLD)  # type: ignore[arg-type]
    assert delay.levels == {1: 55} and delay.timers == {}
