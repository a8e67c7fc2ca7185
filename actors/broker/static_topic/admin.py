"""Static-topic admin calls on the broker (upstream AdminBrokerProcessor, static parts; S1/S2).

- UPDATE_AND_CREATE_STATIC_TOPIC (513): the header is a CreateTopicRequestHeader, the body
  the broker's `TopicQueueMappingDetail` computed by the admin. The mapping (the source of
  truth) is checked and written to topicQueueMapping.json *first*, then the topic config to
  topics.json, each durable before the answer. Upstream writes the topic config first; RIP-21
  says the SOT goes first, and so it does here: a crash after the first write leaves a mapping
  whose topic config is missing or short, which the broker restores from the mapping at its
  next start (`load`) and which the admin's next attempt (same epoch) accepts again. A failed
  mapping write leaves nothing changed (the in-memory table is rolled back) and the topic
  config untouched. A mapping naming another broker is refused (INVALID_PARAMETER).
- GET_TOPIC_CONFIG (351): `TopicConfigAndQueueMapping`, with this broker's mapping when the
  header's ``lo`` is true (what the admin reads before computing a plan). A broker holding a
  mapping but no queues of the topic answers with a 0-queue config, as upstream's would.
- UPDATE_AND_CREATE_TOPIC on a static topic is refused: its queues are fixed by the mapping
  (RIP-21 "UpdateTopic"); other topics go to the admin processor as before.
- DELETE_TOPIC_IN_BROKER also deletes the topic's mapping.
- GET_ALL_TOPIC_CONFIG (what a slave syncs, slave_sync.py): the topic table plus every
  mapping and the mappings' DataVersion (upstream TopicConfigAndMappingSerializeWrapper).

Collaborators: the topic table, the mapping table and the admin processor (the calls it
passes on); nothing else of the broker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import assert_never

import structlog

from rocketrio.actors.broker.admin.processor import AdminProcessor
from rocketrio.actors.broker.dispatch.answers import refused
from rocketrio.actors.broker.dispatch.outcomes import DONE, Done, Refusal
from rocketrio.actors.broker.dispatch.table import Handler
from rocketrio.actors.broker.tables.tables import TopicTable
from rocketrio.actors.broker.tables.topic_config import check_topic_name
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingTable
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import DataVersion, TopicConfig
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicConfigRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json
from rocketrio.protocol.static_topic import (
    MappingError,
    TopicConfigAndMappingDetailWrapper,
    TopicConfigAndQueueMapping,
    TopicQueueMappingDetail,
)


class StaticTopicProcessor:
    def __init__(
        self,
        *,
        topics: TopicTable,
        mappings: TopicQueueMappingTable,
        admin: AdminProcessor,
        on_change: Callable[[], None] = lambda: None,
        store_barrier: Callable[[], Awaitable[int]] | None = None,
        release_held: Callable[[str, list[int]], None] = lambda topic, queues: None,
    ) -> None:
        self.on_change = on_change  # a mapping changed: register with the NameServers (S3)
        # (topic, physical queue ids): answer the pulls held on queues whose logic queue this
        # broker stopped leading (pull/hold.py release_queues)
        self.release_held = release_held
        # returns once every put queued before is stored (the CommitLog end then)
        self.store_barrier = store_barrier
        self.topics = topics
        self.mappings = mappings
        self.admin = admin
        self.log = structlog.get_logger("broker").bind(broker=mappings.bname, actor="static_topic")

    async def load(self) -> bool:
        """At start, after topics.json: read the mappings and restore the topic configs a
        crash between the two writes left behind. True when the file came from the .bak."""
        from_backup = await self.mappings.load_file()
        repairs = self.mappings.topic_configs_to_repair(self.topics.table)
        for tc in repairs:
            self.topics.update(tc)
            events.emit(
                self.log,
                events.StaticTopicConfigRepaired(
                    topic=tc.topicName, read_queues=tc.readQueueNums, write_queues=tc.writeQueueNums
                ),
            )
        if repairs:
            await self.topics.persist()
        return from_backup

    async def update_static_topic(
        self, h: CreateTopicRequestHeader, detail: TopicQueueMappingDetail
    ) -> Done | Refusal:
        bad = check_topic_name(h.topic)
        if bad:
            return Refusal(ResponseCode.INVALID_PARAMETER, bad)
        if self.topics.is_system_topic(h.topic):
            return Refusal(
                ResponseCode.INVALID_PARAMETER,
                f"The topic[{h.topic}] is conflict with system topic.",
            )
        if detail.topic != h.topic:
            return Refusal(
                ResponseCode.INVALID_PARAMETER,
                f"the mapping is for topic {detail.topic}, the header names {h.topic}",
            )
        held = self.mappings.table.get(h.topic)
        held_version = self.mappings.data_version
        try:
            changed = self.mappings.update(detail, force=bool(h.force))
        except MappingError as e:
            events.emit(
                self.log,
                events.StaticTopicMappingRefused(
                    topic=h.topic, mapping_bname=detail.bname, reason=str(e)
                ),
            )
            return Refusal(ResponseCode.INVALID_PARAMETER, str(e))
        if changed:
            try:
                await self.mappings.persist()  # the source of truth first
            except OSError as e:
                self._roll_back(h.topic, held, held_version)
                return Refusal(
                    ResponseCode.SYSTEM_ERROR,
                    f"could not write {self.mappings.file.path}: {e}; nothing was changed",
                )
            self.on_change()
        mapping = self.mappings.table[h.topic]
        if changed:
            await self._seal_released(held, mapping)
        tc = self._topic_config(h, mapping)
        if tc is not None:
            self.topics.update(tc)
            await self.topics.persist()  # always: a retry after a failed write must write
        events.emit(
            self.log,
            events.StaticTopicMappingUpdated(
                topic=h.topic,
                epoch=mapping.epoch,
                total_queues=mapping.totalQueues,
                led_queues=sorted(mapping.leader_id_map()),
            ),
        )
        return DONE

    async def _seal_released(
        self, held: TopicQueueMappingDetail | None, mapping: TopicQueueMappingDetail
    ) -> None:
        """This broker stopped leading some logic queues (a remapping's "block the old
        leader"): from now on their sends are refused (static_topic_send), and before the
        admin gets its answer and reads this broker's max offsets to decide the new logic
        offsets, every send accepted while it still led them is stored. Otherwise a message in
        the store's inbox would land past the sealed end and never be read. Then the pulls held
        on those queues are answered: nothing arrives there any more, and the consumers'
        next pulls are refused (NOT_LEADER_FOR_QUEUE), which sends them to the new leader at
        once instead of after their hold (up to brokerSuspendMaxTimeMillis, 15 s)."""
        if held is None:
            return
        moved = held.released_by(mapping)
        if not moved:
            return
        released = sorted(moved)
        end = await self.store_barrier() if self.store_barrier is not None else -1
        self.release_held(mapping.topic, [moved[gid] for gid in released])
        events.emit(
            self.log,
            events.StaticTopicLeadershipReleased(
                topic=mapping.topic, released_queues=released, commitlog_offset=end
            ),
        )

    def _roll_back(
        self, topic: str, held: TopicQueueMappingDetail | None, version: DataVersion
    ) -> None:
        if held is None:
            self.mappings.table.pop(topic, None)
        else:
            self.mappings.table[topic] = held
        self.mappings.data_version = version

    def _topic_config(
        self, h: CreateTopicRequestHeader, mapping: TopicQueueMappingDetail
    ) -> TopicConfig | None:
        """The topic config the header asks for, never fewer queues than the mapping names
        here; None for a broker holding no queue of the topic (no 0-queue config is kept)."""
        own = [
            item.queueId
            for items in mapping.hostedQueues.values()
            for item in items
            if item.bname == self.mappings.bname
        ]
        need = max(own, default=-1) + 1
        old = self.topics.select(h.topic)
        read = max(h.readQueueNums, need, old.readQueueNums if old else 0)
        write = max(h.writeQueueNums, need, old.writeQueueNums if old else 0)
        if read == 0 and write == 0:
            return None
        return TopicConfig(
            topicName=h.topic,
            readQueueNums=read,
            writeQueueNums=write,
            perm=h.perm,
            topicFilterType=h.topicFilterType or "SINGLE_TAG",
            topicSysFlag=h.topicSysFlag or 0,
            order=h.order,
        )

    async def update_topic(self, h: CreateTopicRequestHeader) -> Done | Refusal:
        if self.mappings.is_static(h.topic):
            return Refusal(
                ResponseCode.INVALID_PARAMETER,
                f"topic {h.topic} is a static topic: its queues are fixed by its queue mapping; "
                "use updateStaticTopic or remappingStaticTopic",
            )
        return await self.admin.update_topic(h)

    async def delete_topic(self, h: DeleteTopicRequestHeader) -> Done | Refusal:
        outcome = await self.admin.delete_topic(h)
        if isinstance(outcome, Done) and self.mappings.delete(h.topic):
            await self.mappings.persist()
            self.on_change()
        return outcome

    def topic_config(self, h: GetTopicConfigRequestHeader) -> TopicConfigAndQueueMapping | Refusal:
        tc = self.topics.select(h.topic)
        mapping = self.mappings.get(h.topic) if h.lo else None
        if tc is None and mapping is None:
            return Refusal(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}"
            )
        if tc is None:
            tc = TopicConfig(h.topic, readQueueNums=0, writeQueueNums=0)
        return TopicConfigAndQueueMapping(
            tc.topicName,
            tc.readQueueNums,
            tc.writeQueueNums,
            tc.perm,
            tc.topicFilterType,
            tc.topicSysFlag,
            tc.order,
            dict(tc.attributes),
            mapping.copy() if mapping is not None else None,
        )

    def all_topic_config(self) -> TopicConfigAndMappingDetailWrapper:
        """GET_ALL_TOPIC_CONFIG (what a slave syncs, upstream getAllTopicConfig): the topic
        table plus every static topic's mapping and the mappings' DataVersion."""
        topics = self.topics.snapshot()
        mappings = self.mappings.snapshot()
        return TopicConfigAndMappingDetailWrapper(
            topics.topicConfigTable,
            topics.dataVersion,
            topicQueueMappingDetailMap=mappings.topicQueueMappingInfoMap,
            mappingDataVersion=mappings.dataVersion,
        )

    def handlers(self) -> dict[int, Handler]:
        """The remoting handlers (they replace the admin processor's for these codes)."""

        def answer(cmd: RemotingCommand, outcome: Done | Refusal) -> RemotingCommand:
            match outcome:
                case Done():
                    return cmd.make_response(ResponseCode.SUCCESS)
                case Refusal():
                    return refused(cmd, outcome)
                case _:
                    assert_never(outcome)

        async def update_static(ctx: RequestContext) -> RemotingCommand:
            h = from_ext(CreateTopicRequestHeader, ctx.cmd.ext_fields)
            detail = from_json(TopicQueueMappingDetail, ctx.cmd.body)
            return answer(ctx.cmd, await self.update_static_topic(h, detail))

        async def update(ctx: RequestContext) -> RemotingCommand:
            h = from_ext(CreateTopicRequestHeader, ctx.cmd.ext_fields)
            return answer(ctx.cmd, await self.update_topic(h))

        async def delete(ctx: RequestContext) -> RemotingCommand:
            h = from_ext(DeleteTopicRequestHeader, ctx.cmd.ext_fields)
            return answer(ctx.cmd, await self.delete_topic(h))

        async def get_config(ctx: RequestContext) -> RemotingCommand:
            outcome = self.topic_config(from_ext(GetTopicConfigRequestHeader, ctx.cmd.ext_fields))
            if isinstance(outcome, Refusal):
                return refused(ctx.cmd, outcome)
            return ctx.cmd.make_response(ResponseCode.SUCCESS, body=fastjson.encode(outcome))

        async def all_config(ctx: RequestContext) -> RemotingCommand:
            body = fastjson.encode(self.all_topic_config())
            return ctx.cmd.make_response(ResponseCode.SUCCESS, body=body)

        return {
            RequestCode.GET_ALL_TOPIC_CONFIG: all_config,
            RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC: update_static,
            RequestCode.UPDATE_AND_CREATE_TOPIC: update,
            RequestCode.DELETE_TOPIC_IN_BROKER: delete,
            RequestCode.GET_TOPIC_CONFIG: get_config,
        }
