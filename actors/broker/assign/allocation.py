"""Which queues a consumer owns when the broker assigns them (upstream QueryAssignmentProcessor's
doLoadBalance and allocate4Pop; the AllocateMessageQueueAveragely / ...ByCircle strategies are
protocol/allocation.py's, shared with the client's rebalance).
Pure: the shell hands in the topic's queues (its route), the group's client ids (heartbeats) and
the group's mode for the topic.

Rules, as upstream's:
- the mode: the one set for (topic, group), else PULL for a retry topic, else the broker's
  defaultMessageRequestMode (with defaultPopShareQueueNum when that is POP);
- BROADCASTING: every queue of the topic;
- CLUSTERING: the queues (an LMQ topic: its one queue 0 on this broker) and the client ids,
  both sorted, split by the named strategy (AVG, AVG_BY_CIRCLE); with serverLoadBalancerEnable
  off every queue;
- POP mode with ``popShareQueueNum`` <= 0 or >= consumers - 1: every consumer pops every broker
  of the topic (queue id -1: "any queue there"); otherwise its own queues plus those of the
  next ``popShareQueueNum`` consumers in the sorted list, or, with more consumers than queues,
  one queue each (consumer i gets queue i mod queues);
- no answer (`NoAssignment`, sent as a body without ``messageQueueAssignments``: the client
  keeps what it has) when the topic has no route, the group has no consumers on this broker,
  the strategy name is unknown, or a strategy refuses its input (an empty client id, no queues,
  no consumers). A client id not among the consumers gets an empty list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import attrs

from rocketrio.protocol.allocation import allocate_averagely as averagely
from rocketrio.protocol.allocation import allocate_by_circle as by_circle
from rocketrio.protocol.assignment import (
    BROADCASTING,
    POP,
    PULL,
    MessageQueueAssignment,
    QueryAssignmentRequestBody,
    SetMessageRequestModeRequestBody,
)
from rocketrio.protocol.bodies import MessageQueue

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
LMQ_PREFIX: Final = "%LMQ%"
LMQ_QUEUE_ID: Final = 0
ANY_QUEUE: Final = -1  # a POP assignment of a whole broker

Strategy = Callable[[str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


class StrategyInputError(ValueError):
    """A strategy refused its input (upstream's IllegalArgumentException)."""


def _check(cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """Upstream AbstractAllocateMessageQueueStrategy.check: False when ``cid`` is not a member."""
    if not cid:
        raise StrategyInputError("currentCID is empty")
    if not mq_all:
        raise StrategyInputError("mqAll is null or mqAll empty")
    if not cid_all:
        raise StrategyInputError("cidAll is null or cidAll empty")
    return cid in cid_all


def allocate_averagely(
    cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AVG (protocol/allocation.py), after upstream's input check."""
    return averagely(cid, mq_all, cid_all) if _check(cid, mq_all, cid_all) else []


def allocate_by_circle(
    cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AVG_BY_CIRCLE (protocol/allocation.py), after upstream's input check."""
    return by_circle(cid, mq_all, cid_all) if _check(cid, mq_all, cid_all) else []


STRATEGIES: Final[dict[str, Strategy]] = {
    "AVG": allocate_averagely,
    "AVG_BY_CIRCLE": allocate_by_circle,
}


def allocate_one_each(
    cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """More POP consumers than queues: consumer i gets queue i mod queues."""
    if not _check(cid, mq_all, cid_all):
        return []
    return [mq_all[cid_all.index(cid) % len(mq_all)]]


def allocate_for_pop(
    strategy: Strategy,
    cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
    share: int,
) -> list[MessageQueue]:
    """POP mode: the queues ``cid`` pops, sharing the next ``share`` consumers' queues."""
    if share <= 0 or share >= len(cid_all) - 1:
        return [attrs.evolve(mq, queueId=ANY_QUEUE) for mq in mq_all]
    if len(cid_all) > len(mq_all):
        return allocate_one_each(cid, mq_all, cid_all)
    result = strategy(cid, mq_all, cid_all)
    if cid in cid_all:
        index = cid_all.index(cid)
        for step in range(1, share + 1):
            result += strategy(cid_all[(index + step) % len(cid_all)], mq_all, cid_all)
    return result


@attrs.frozen
class ModeDefaults:
    """The broker's defaults for a (topic, group) never set (BrokerConfig keys)."""

    mode: str = PULL  # defaultMessageRequestMode
    pop_share: int = -1  # defaultPopShareQueueNum
    server_balance: bool = True  # serverLoadBalancerEnable


def effective_mode(
    stored: SetMessageRequestModeRequestBody | None, topic: str, group: str, defaults: ModeDefaults
) -> SetMessageRequestModeRequestBody:
    """The mode that applies: the one set, else PULL for a retry topic, else the default."""
    if stored is not None:
        return stored
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return SetMessageRequestModeRequestBody(topic, group, PULL)
    share = defaults.pop_share if defaults.mode == POP else 0
    return SetMessageRequestModeRequestBody(topic, group, defaults.mode, share)


@attrs.frozen
class Assigned:
    assignments: list[MessageQueueAssignment]


@attrs.frozen
class NoAssignment:
    """No valid answer (module docstring); ``reason`` is for the log."""

    reason: str


Assignment = Assigned | NoAssignment


def _sorted_unique(mqs: Sequence[MessageQueue]) -> list[MessageQueue]:
    return sorted(set(mqs), key=lambda mq: (mq.topic, mq.brokerName, mq.queueId))


def assign(
    req: QueryAssignmentRequestBody,
    mode: SetMessageRequestModeRequestBody,
    queues: Sequence[MessageQueue] | None,
    consumers: Sequence[str] | None,
    *,
    broker_name: str,
    server_balance: bool = True,
) -> Assignment:
    """QUERY_ASSIGNMENT's answer for ``req`` under ``mode`` (see `effective_mode`).

    ``queues``: the topic's readable queues (None: the topic has no route); ``consumers``: the
    client ids of the group's heartbeats here (None: no such group)."""
    if req.topic.startswith(LMQ_PREFIX) and req.messageModel != BROADCASTING:
        queues = [MessageQueue(req.topic, broker_name, LMQ_QUEUE_ID)]
    if queues is None:
        return NoAssignment(f"topic {req.topic} does not exist")
    mqs = _sorted_unique(queues)
    if req.messageModel == BROADCASTING or not server_balance:
        return _answer(mqs, mode.mode)
    if consumers is None:
        return NoAssignment(f"no consumer of group {req.consumerGroup} on this broker")
    strategy = STRATEGIES.get(req.strategyName or "")
    if strategy is None:
        return NoAssignment(f"unsupported strategy {req.strategyName}")
    cids = sorted(consumers)
    try:
        if mode.mode == POP:
            mine = allocate_for_pop(strategy, req.clientId, mqs, cids, mode.popShareQueueNum)
        else:
            mine = strategy(req.clientId, mqs, cids)
    except StrategyInputError as e:
        return NoAssignment(f"strategy {req.strategyName} refused: {e}")
    return _answer(_sorted_unique(mine), mode.mode)


def _answer(mqs: list[MessageQueue], mode: str) -> Assigned:
    return Assigned([MessageQueueAssignment(mq, mode) for mq in mqs])
