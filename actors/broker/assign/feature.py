"""The broker's queue assignment as the broker builds it (upstream QueryAssignmentProcessor and
AdminBrokerProcessor.getAllMessageRequestMode):

- QUERY_ASSIGNMENT (400): the body names topic, group, client id, strategy and message model;
  the answer is SUCCESS with the queues `allocation.assign` gives this client, each with the
  group's mode (PULL or POP), or a body without ``messageQueueAssignments`` when there is no
  valid answer (the reason is logged, as upstream's warnings);
- SET_MESSAGE_REQUEST_MODE (401): refused NO_PERMISSION for a retry topic, TOPIC_NOT_EXIST for
  a topic this broker does not hold, SUBSCRIPTION_GROUP_NOT_EXIST for an unknown group (with
  autoCreateSubscriptionGroup on, the group is created, as upstream's lookup does); otherwise
  the mode is recorded and written to messageRequestMode.json before SUCCESS;
- GET_ALL_MESSAGE_REQUEST_MODE (402): every mode set, messageRequestMode.json's shape.

Every role serves all three, as upstream registers them on every broker: a slave (and an acting
master) answers from the modes its slave sync copied from the master.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.actors.broker.assign.allocation import (
    Assigned,
    ModeDefaults,
    NoAssignment,
    assign,
    effective_mode,
)
from rocketrio.actors.broker.assign.queues import TopicQueues, local_queues
from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.dispatch.answers import answer_done, answer_json
from rocketrio.actors.broker.dispatch.outcomes import DONE, Done, Refusal
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.actors.kernel.remoting import RemotingClient, RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol.assignment import (
    MessageRequestModeSerializeWrapper,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json


class AssignFeature:
    """QUERY_ASSIGNMENT and the message request modes of one broker (module docstring)."""

    def __init__(
        self,
        io: BrokerIO,
        *,
        tables: BrokerTables,
        consumers: Callable[[str], list[str] | None],
        client: Callable[[], RemotingClient | None],
    ) -> None:
        self.config = config = io.config
        self.log = io.log.bind(actor="assign")
        self.tables = tables
        self.modes = tables.request_modes
        self.consumers = consumers
        self.queues = TopicQueues(
            client,
            lambda: config.namesrv_addrs,
            lambda topic: local_queues(topic, tables.topics.select(topic), config.brokerName),
        )

    def defaults(self) -> ModeDefaults:
        c = self.config
        return ModeDefaults(
            c.defaultMessageRequestMode, c.defaultPopShareQueueNum, c.serverLoadBalancerEnable
        )

    async def query_assignment(
        self, req: QueryAssignmentRequestBody
    ) -> QueryAssignmentResponseBody:
        stored = self.modes.get_mode(req.topic, req.consumerGroup)
        mode = effective_mode(stored, req.topic, req.consumerGroup, self.defaults())
        outcome = assign(
            req,
            mode,
            await self.queues.queues(req.topic),
            self.consumers(req.consumerGroup),
            broker_name=self.config.brokerName,
            server_balance=self.config.serverLoadBalancerEnable,
        )
        match outcome:
            case Assigned(assignments):
                return QueryAssignmentResponseBody(assignments)
            case NoAssignment(reason):
                none = events.AssignmentNone(
                    topic=req.topic, group=req.consumerGroup, client_id=req.clientId, reason=reason
                )
                events.emit(self.log, none)
                return QueryAssignmentResponseBody(None)

    async def set_mode(self, body: SetMessageRequestModeRequestBody) -> Done | Refusal:
        if body.topic.startswith("%RETRY%"):
            return Refusal(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if self.tables.topics.select(body.topic) is None:
            return Refusal(ResponseCode.TOPIC_NOT_EXIST, f"topic[{body.topic}] not exist")
        if self.tables.groups.find_group(body.consumerGroup) is None:
            return Refusal(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist"
            )
        self.modes.set_mode(body)
        await self.modes.persist()
        events.emit(
            self.log,
            events.MessageRequestModeSet(
                topic=body.topic,
                group=body.consumerGroup,
                mode=body.mode,
                pop_share_queue_num=body.popShareQueueNum,
            ),
        )
        return DONE

    def all_modes(self) -> MessageRequestModeSerializeWrapper:
        return self.modes.snapshot()

    def handlers(self) -> Handlers:
        async def query(ctx: RequestContext) -> RemotingCommand:
            req = from_json(QueryAssignmentRequestBody, ctx.cmd.body)
            return answer_json(ctx.cmd, await self.query_assignment(req))

        async def set_mode(ctx: RequestContext) -> RemotingCommand:
            body = from_json(SetMessageRequestModeRequestBody, ctx.cmd.body)
            return answer_done(ctx.cmd, await self.set_mode(body))

        async def all_modes(ctx: RequestContext) -> RemotingCommand:
            return answer_json(ctx.cmd, self.all_modes())

        return {
            RequestCode.QUERY_ASSIGNMENT: query,
            RequestCode.SET_MESSAGE_REQUEST_MODE: set_mode,
            RequestCode.GET_ALL_MESSAGE_REQUEST_MODE: all_modes,
        }
