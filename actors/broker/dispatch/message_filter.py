"""Which stored messages a pull or a POP hands out: tag codes and SQL92 selectors (upstream
ExpressionMessageFilter, ExpressionForRetryMessageFilter, ConsumerFilterManager).

Pure: no I/O, no Trio. `FilterSelectors.for_pull` / `for_pop` turn a subscription into a
`MessageSelector` or a `Refusal`, with upstream's codes and remarks:

- a SQL92 subscription that does not compile, sent in the request (pull's SUBSCRIPTION flag, POP's
  ``exp``): SUBSCRIPTION_PARSE_FAILED "parse the consumer's subscription failed" (upstream's pull
  would, with Java asserts off, build no filter data and deliver everything; this broker refuses);
- a SQL92 subscription known from the heartbeats whose filter data does not exist (it did not
  compile, so upstream's ConsumerFilterManager never registered it): FILTER_DATA_NOT_EXIST; older
  than the request's subVersion: FILTER_DATA_NOT_LATEST;
- a SQL92 pull while ``enablePropertyFilter`` is off: SYSTEM_ERROR "The broker does not support
  consumer to filter message by SQL92" (upstream's POP does not check the key, nor does this one).

The filter data of a heartbeat subscription is compiled once per (topic, group, expression,
version) and kept while the group subscribes to it (`ConsumerFilterManager`).

Retry topics (``%RETRY%<group>``) are subscribed with TAG ``*`` by every client, so they are not
filtered, as upstream. With ``filterSupportRetry`` a SQL92 subscription of a retry topic is
evaluated with the filter data of the message's original topic (its RETRY_TOPIC property) and
the group, as upstream's ExpressionForRetryMessageFilter. POP evaluates its retry topic's
messages with the original topic's selector, as upstream's PopMessageProcessor does.

A record is judged by its properties only (`record_properties`, without decoding the body); a
selector that fails to evaluate on a message does not match it (upstream logs and skips).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import attrs

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.filter_data import (
    ConsumerFilterData,
    ConsumerFilterManager,
    build_filter_data,
)
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.filter import is_tag_type, tag_codes_of
from rocketrio.protocol.message_decode import MessageDecodeError, stored_properties
from rocketrio.protocol.message_format import PROPERTY_RETRY_TOPIC, decode_properties
from rocketrio.protocol.sql92_compile import compile_selector
from rocketrio.protocol.sql92_tree import Expr, Sql92EvalError, matches
from rocketrio.storage.cq_ext import BitMapProbe
from rocketrio.storage.store_read import CqMatch
from rocketrio.storage.store_types import GetMessageStatus, GetResult

__all__ = [
    "ConsumerFilterData",
    "ConsumerFilterManager",
    "FilterConfig",
    "FilterSelectors",
    "MessageSelector",
    "build_filter_data",
]

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
# the live keys (UPDATE_BROKER_CONFIG) the filters read, through `FilterConfig`
FILTER_KEYS = frozenset({"enablePropertyFilter", "filterSupportRetry"})

PARSE_FAILED = "parse the consumer's subscription failed"
FILTER_DATA_NOT_EXIST = (
    "The broker's consumer filter data is not exist!Your expression may be wrong!"
)
FILTER_DATA_NOT_LATEST = "the consumer's consumer filter data not latest"


def not_supported(expression_type: str) -> str:
    return f"The broker does not support consumer to filter message by {expression_type}"


@attrs.frozen
class FilterConfig:
    """The broker config values the filters read (rebuilt by `reconfigure`)."""

    enable_property_filter: bool = False
    filter_support_retry: bool = False
    # enableCalcFilterBitMap with enableConsumeQueueExt (read at start, as upstream)
    use_bitmap: bool = False

    @classmethod
    def of(cls, c: BrokerConfig) -> FilterConfig:
        return cls(
            c.enablePropertyFilter,
            c.filterSupportRetry,
            c.enableCalcFilterBitMap and c.enableConsumeQueueExt,
        )


class RecordProperties(Mapping[str, str]):
    """The properties of one stored record, looked up in their encoded text on demand (a
    selector reads two or three of them): the same answers as upstream's decodeProperties, the
    last pair of a name wins and an empty value is no value."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = "\x02" + text

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        t = self._text
        i = t.rfind(f"\x02{name}\x01")
        if i < 0:
            return default
        start = i + len(name) + 2
        end = t.find("\x02", start)
        value = t[start:] if end < 0 else t[start:end]
        if not value:  # dropped by upstream; an earlier pair of the name may still count
            return self._decoded().get(name, default)
        return value

    def _decoded(self) -> dict[str, str]:
        return decode_properties(self._text[1:])

    def __getitem__(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._decoded())

    def __len__(self) -> int:
        return len(self._decoded())


def record_properties(record: bytes) -> RecordProperties:
    """The properties of one stored record (nothing else of it is decoded)."""
    return RecordProperties(stored_properties(record).decode("utf-8", "replace"))


@attrs.frozen
class MessageSelector:
    """What a read keeps: ``tag_codes`` is applied on the ConsumeQueue by the store; ``keep``
    (None for TAG subscriptions) on each record's properties afterwards."""

    tag_codes: set[int] | None
    keep: Callable[[bytes], bool] | None = None
    # the filter's bit-map probe: records it rejects are skipped on the ConsumeQueue ext
    probe: BitMapProbe | None = None

    @property
    def cq_match(self) -> CqMatch:
        """What the store applies on the ConsumeQueue (tag codes, or the bit-map probe)."""
        return self.tag_codes if self.probe is None else self.probe

    def filter(self, result: GetResult) -> GetResult:
        """Drop the records ``keep`` refuses; a read left with none is NO_MATCHED_MESSAGE
        (the consumer asks again at once from next_begin_offset, as upstream)."""
        keep = self.keep
        if keep is None or not result.buffers:
            return result
        kept = [b for b in result.buffers if keep(b)]
        if len(kept) != len(result.buffers):
            result.buffers = kept
            result.message_count = len(kept)
            if not kept and result.status is GetMessageStatus.FOUND:
                result.status = GetMessageStatus.NO_MATCHED_MESSAGE
        return result


EVERYTHING = MessageSelector(None)


def sql_keep(compiled: Expr) -> Callable[[bytes], bool]:
    """A record test for one compiled selector (a damaged record is not ours to judge: kept,
    so the store's own check reports it)."""

    judge = compile_selector(compiled)

    def keep(record: bytes) -> bool:
        try:
            props = record_properties(record)
        except MessageDecodeError:
            return True
        try:
            return judge(props) is True
        except Sql92EvalError:  # upstream logs it and does not deliver the message
            return False

    return keep


class FilterSelectors:
    """Builds the `MessageSelector` of a pull or a POP (module docstring)."""

    def __init__(self, config: FilterConfig, manager: ConsumerFilterManager) -> None:
        self.config = config
        self.manager = manager

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        if changed & FILTER_KEYS:
            self.config = attrs.evolve(FilterConfig.of(config), use_bitmap=self.config.use_bitmap)

    def for_pull(
        self, sub: SubscriptionData, group: str, sub_version: int, from_request: bool
    ) -> MessageSelector | Refusal:
        """The selector of a pull whose subscription came from the request or a heartbeat."""
        if is_tag_type(sub.expressionType):
            return MessageSelector(tag_codes_of(sub))
        if from_request:
            data = build_filter_data(sub.topic, group, sub)
            if data is None:
                return Refusal(ResponseCode.SUBSCRIPTION_PARSE_FAILED, PARSE_FAILED)
        else:
            data = self.manager.get(sub.topic, group)
            if data is None:
                return Refusal(ResponseCode.FILTER_DATA_NOT_EXIST, FILTER_DATA_NOT_EXIST)
            if data.client_version < sub_version:
                return Refusal(ResponseCode.FILTER_DATA_NOT_LATEST, FILTER_DATA_NOT_LATEST)
        if not self.config.enable_property_filter:
            return Refusal(ResponseCode.SYSTEM_ERROR, not_supported(sub.expressionType))
        if self.config.filter_support_retry and sub.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return MessageSelector(None, self._retry_keep(group))
        probe = None if from_request else self._probe(data)
        return MessageSelector(None, sql_keep(data.compiled), probe)

    def for_pop(self, sub: SubscriptionData, group: str) -> MessageSelector | Refusal:
        """The selector of a POP (its ``exp``/``expType``); it also filters the POP retry
        topic's messages, as upstream."""
        if is_tag_type(sub.expressionType):
            return MessageSelector(tag_codes_of(sub))
        data = build_filter_data(sub.topic, group, sub)
        if data is None:
            return Refusal(ResponseCode.SUBSCRIPTION_PARSE_FAILED, PARSE_FAILED)
        # the group's registered filter of the same expression has bits in the bit-maps
        known = self.manager.registered(sub.topic, group)
        probe = self._probe(known) if known and known.expression == sub.subString else None
        return MessageSelector(None, sql_keep(data.compiled), probe)

    def _probe(self, data: ConsumerFilterData) -> BitMapProbe | None:
        return self.manager.probe(data) if self.config.use_bitmap else None

    def _retry_keep(self, group: str) -> Callable[[bytes], bool]:
        """filterSupportRetry: judge a retry message by its original topic's filter data."""
        manager = self.manager

        def keep(record: bytes) -> bool:
            try:
                props = record_properties(record)
            except MessageDecodeError:
                return True
            data = manager.get(props.get(PROPERTY_RETRY_TOPIC, ""), group)
            return data is None or matches(data.compiled, props)

        return keep


def no_filters() -> FilterSelectors:
    """Selectors of a broker with the defaults and no heartbeat subscriptions (unit tests)."""
    return FilterSelectors(FilterConfig(), ConsumerFilterManager(lambda group, topic: None))
