"""The clean-up of a static topic's old generations (upstream TopicQueueMappingCleanService;
RIP-21 S4 "mappings older than 2 generations cleaned"): a thin Trio shell around the pure
decisions of protocol/static_topic_alloc.py.

Every ``topicQueueMappingCleanInterval`` ms (upstream: every 5 minutes, hard-coded, and only in
the ``deleteWhen`` hours; here at every interval) a master goes through its mappings:

- a logic queue it leads: its earliest generation goes when that physical queue holds nothing
  (min == max, or max == 0: upstream cleanItemExpired, `expired_earliest`); then every
  generation more than two behind the leader goes once each group has read it
  (`generations_read_by_all`). A group's position is its logic offset as Double-Check-Read
  finds it: the value stored here, else on the previous leaders (newest first), whose tables
  are read with GET_ALL_CONSUMER_OFFSET. A broker that cannot be asked keeps everything;
- a logic queue it lists but no longer leads: it asks the leader its list names for that
  leader's mapping (GET_TOPIC_CONFIG lo=true) and drops what the leader dropped, or the whole
  list when that leader says another broker leads now (`follow_leader`; upstream
  cleanItemListMoreThanSecondGen). So every broker's file loses a cleaned generation within
  two rounds.

Like upstream's, a clean-up keeps the epoch (the leader does not change; a bumped epoch on
only some brokers would make the admin's next remapping refuse the topic, upstream
checkNameEpochNumConsistence). It is applied only if the mapping still has the epoch it was
decided on, persisted, logged (``static_topic_mapping_cleaned``) and re-registered. A slave
never cleans: it syncs its master's file. A logic offset below the new first generation then
answers PULL_OFFSET_MOVED with the first valid offset (upstream #5493, static_topic_pull.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import trio

from rocketrio.actors.broker.static_topic.offsets import StaticTopicOffsets
from rocketrio.actors.broker.static_topic.remote import RemoteBrokers, RemoteUnavailable
from rocketrio.actors.broker.tables.consumer_offset import ConsumerOffsetManager
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingTable
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import ConsumerOffsetSerializeWrapper
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import GetTopicConfigRequestHeader
from rocketrio.protocol.serde import HeaderError, from_json
from rocketrio.protocol.static_topic import (
    LogicQueueMappingItem,
    TopicConfigAndQueueMapping,
    TopicQueueMappingDetail,
)
from rocketrio.protocol.static_topic_alloc import (
    MAX_GENERATIONS_BEHIND,
    expired_earliest,
    follow_leader,
    generations_read_by_all,
)


class _Unreadable(Exception):
    """A figure the decision needs could not be read: keep everything this round."""


class StaticTopicCleanService:
    """See module docstring. Run with ``nursery.start_soon(service.run)``."""

    def __init__(
        self,
        *,
        mappings: TopicQueueMappingTable,
        offsets: ConsumerOffsetManager,
        static_offsets: StaticTopicOffsets,
        remote: RemoteBrokers,
        interval_ms: Callable[[], int],
        is_master: Callable[[], bool],
        on_change: Callable[[], None],
        log: Any,
    ) -> None:
        self.mappings = mappings
        self.offsets = offsets
        self.static_offsets = static_offsets
        self.remote = remote
        self.interval_ms = interval_ms
        self.is_master = is_master
        self.on_change = on_change
        self.log = log
        self.rounds = 0

    async def run(self) -> None:
        while True:
            await trio.sleep(self.interval_ms() / 1000)
            if self.is_master():
                await self.clean_once()

    async def clean_once(self) -> int:
        """One round over every mapping; returns how many logic queues changed."""
        changed = 0
        for topic, detail in sorted(self.mappings.table.items()):
            if detail.bname != self.mappings.bname:
                continue  # never kept (`adopt` refuses them); upstream only warns
            decisions: dict[int, tuple[int | None, str]] = {}
            for gid, items in sorted(detail.hostedQueues.items()):
                try:
                    if items and items[-1].bname == detail.bname:
                        found = await self._as_leader(detail, gid, items)
                    else:
                        found = await self._as_follower(detail, gid)
                except _Unreadable:
                    continue
                if found is not None:
                    decisions[gid] = found
            if decisions and self.mappings.clean(
                topic, detail.epoch, {g: first for g, (first, _) in decisions.items()}
            ):
                await self.mappings.persist()
                for gid, (first, reason) in sorted(decisions.items()):
                    events.emit(
                        self.log,
                        events.StaticTopicMappingCleaned(
                            topic=topic, queue_id=gid, kept_from_gen=first, reason=reason
                        ),
                    )
                changed += len(decisions)
                self.on_change()
        self.rounds += 1
        return changed

    async def _as_leader(
        self, detail: TopicQueueMappingDetail, gid: int, items: list[LogicQueueMappingItem]
    ) -> tuple[int | None, str] | None:
        if len(items) <= 1:
            return None
        reason = ""
        first = items[0]
        rng = await self.static_offsets.physical_range(detail, gid, first)
        if rng is None:
            raise _Unreadable
        left = expired_earliest(items, *rng)
        if left is not None:
            items, reason = left, "expired: its physical queue holds nothing"
        keep = None
        if items[-1].gen - items[0].gen > MAX_GENERATIONS_BEHIND:  # else no call is needed
            keep = generations_read_by_all(items, await self._positions(detail, gid, items))
        if keep is not None:
            items = [i for i in items if i.gen >= keep]
            reason = "more than 2 generations behind the leader and read by every group"
        if items[0] is first:
            return None
        return items[0].gen, reason

    async def _positions(
        self, detail: TopicQueueMappingDetail, gid: int, items: list[LogicQueueMappingItem]
    ) -> list[int]:
        """Each group's logic position on ``gid`` as Double-Check-Read finds it."""
        suffix = f"{detail.topic}@"
        found: dict[str, int] = {}
        tables = [self.offsets.table]
        asked = {detail.bname}
        for item in reversed(items[:-1]):
            if item.bname not in asked:
                asked.add(item.bname)
                tables.append(await self._offsets_of(item.bname, detail.topic, gid))
        for table in tables:  # newest leader first: its value wins
            for key, queues in table.items():
                if key.startswith(suffix) and gid in queues:
                    found.setdefault(key, queues[gid])
        return list(found.values())

    async def _offsets_of(self, bname: str, topic: str, gid: int) -> dict[str, dict[int, int]]:
        code = RequestCode.GET_ALL_CONSUMER_OFFSET
        try:
            resp = await self.remote.call(bname, topic, code, None)
            if resp.code != ResponseCode.SUCCESS:
                raise RemoteUnavailable(f"broker {bname}: {resp.code} {resp.remark}")
            return from_json(ConsumerOffsetSerializeWrapper, resp.body).offsetTable
        except (RemoteUnavailable, HeaderError) as e:
            self._failed(topic, gid, bname, code, e)
            raise _Unreadable from e

    async def _as_follower(
        self, detail: TopicQueueMappingDetail, gid: int
    ) -> tuple[int | None, str] | None:
        items = detail.hostedQueues[gid]
        if not items:
            return None
        known = items[-1].bname
        code = RequestCode.GET_TOPIC_CONFIG
        try:
            resp = await self.remote.call(
                known, detail.topic, code, GetTopicConfigRequestHeader(detail.topic, lo=True)
            )
            if resp.code != ResponseCode.SUCCESS:
                raise RemoteUnavailable(f"broker {known}: {resp.code} {resp.remark}")
            leader = from_json(TopicConfigAndQueueMapping, resp.body).mappingDetail
        except (RemoteUnavailable, HeaderError) as e:
            self._failed(detail.topic, gid, known, code, e)
            raise _Unreadable from e
        decided: int | Literal["drop"] | None = follow_leader(detail, gid, leader)
        if decided is None:
            return None
        if decided == "drop":
            return None, f"broker {known} no longer leads: more than one generation behind"
        return decided, f"its leader {known} dropped the older generations"

    def _failed(self, topic: str, gid: int, bname: str, code: int, e: Exception) -> None:
        events.emit(
            self.log,
            events.StaticTopicRemoteReadFailed(
                topic=topic, queue_id=gid, item_broker=bname, call=str(code), error=str(e)
            ),
        )
