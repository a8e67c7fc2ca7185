"""SQL92 filtering as the broker builds it: the selectors pull and POP read through
(dispatch/message_filter.py), the registered filters and their bit-maps
(dispatch/filter_data.py: swept every `SWEEP_INTERVAL_S`, handed to the store's dispatch with
enableCalcFilterBitMap and enableConsumeQueueExt), and CHECK_CLIENT_CONFIG (46).

CHECK_CLIENT_CONFIG answers as upstream's ClientManageProcessor.checkClientConfig: SUCCESS for a
TAG subscription (or none); SYSTEM_ERROR "The broker does not support consumer to filter message
by SQL92" while enablePropertyFilter is off; SUBSCRIPTION_PARSE_FAILED with the compiler's
message (`Sql92ParseError.java_message`) for an expression that does not compile; else SUCCESS.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.answers import answer_done, on_body
from rocketrio.actors.broker.dispatch.bloom import filter_bloom
from rocketrio.actors.broker.dispatch.message_filter import (
    ConsumerFilterManager,
    FilterConfig,
    FilterSelectors,
    not_supported,
)
from rocketrio.actors.broker.dispatch.outcomes import DONE, Done, Refusal
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.kernel.runtime import every_sync
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.filter import CheckClientRequestBody, is_tag_type
from rocketrio.protocol.sql92_parse import EXPRESSION_SQL92, Sql92ParseError, parse_sql92

SWEEP_INTERVAL_S = 1.0  # upstream registers at each heartbeat; this is at most 1 s later


def check_client_config(config: FilterConfig, body: CheckClientRequestBody) -> Done | Refusal:
    """Can this broker filter by the client's subscription (module docstring)?"""
    sub = body.subscriptionData
    if sub is None or is_tag_type(sub.expressionType):
        return DONE
    if not config.enable_property_filter:
        return Refusal(ResponseCode.SYSTEM_ERROR, not_supported(sub.expressionType))
    if sub.expressionType != EXPRESSION_SQL92:  # upstream: no compiler for the type (an NPE)
        return Refusal(ResponseCode.SUBSCRIPTION_PARSE_FAILED, not_supported(sub.expressionType))
    try:
        parse_sql92(sub.subString or "")
    except Sql92ParseError as e:
        return Refusal(ResponseCode.SUBSCRIPTION_PARSE_FAILED, e.java_message)
    return DONE


class FilterFeature:
    """The filters of one broker (module docstring)."""

    def __init__(
        self,
        io: BrokerIO,
        *,
        subscription: Callable[[str, str], SubscriptionData | None],
        live: Callable[[], Iterable[tuple[str, SubscriptionData]]] = lambda: (),
        calc_floor: Callable[[], int] = lambda: -1,
    ) -> None:
        """``subscription(group, topic)``: the group's heartbeat subscription of the topic;
        ``live()``: every (group, subscription) of the live consumer groups; ``calc_floor()``:
        the latest time a bit-map on disk was computed (the store's, at its open)."""
        self.log = io.log.bind(actor="filter")
        c = io.config
        self.manager = ConsumerFilterManager(
            subscription,
            live=live,
            bloom=filter_bloom(c),
            now_ms=io.now_ms,
            clean_span_ms=c.filterDataCleanTimeSpan,
            calc_floor=calc_floor,
        )
        self.selectors = FilterSelectors(FilterConfig.of(c), self.manager)

    def sweep(self) -> None:
        """Register live SQL92 subscriptions, age out the filters of departed groups."""
        dropped = self.manager.sweep()
        if dropped:
            events.emit(self.log, events.FilterDataCleaned(dropped=dropped, left=len(self.manager)))

    async def run_services(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        await every_sync(SWEEP_INTERVAL_S, self.sweep)

    def handlers(self) -> Handlers:
        selectors, log = self.selectors, self.log

        def check(body: CheckClientRequestBody) -> Done | Refusal:
            outcome = check_client_config(selectors.config, body)
            sub = body.subscriptionData
            if isinstance(outcome, Refusal) and sub is not None:
                refused = events.Sql92SubscriptionRefused(
                    client_id=body.clientId or "",
                    group=body.group or "",
                    topic=sub.topic,
                    expression=sub.subString,
                    error=outcome.remark,
                )
                events.emit(log, refused)
            return outcome

        return {
            RequestCode.CHECK_CLIENT_CONFIG: on_body(CheckClientRequestBody, check, answer_done)
        }

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        self.selectors.reconfigure(config, changed)
