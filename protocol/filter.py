"""Subscriptions (upstream FilterAPI): "tagA || tagB" or "*" -> SubscriptionData, tag codes;
a SQL92 expression -> SubscriptionData of type SQL92.

The ConsumeQueue stores each message's tagsCode (Java String.hashCode of its TAGS), so the
broker filters by hash code and the client re-checks the tag string (hash collisions are the
client's to drop, like upstream). A SQL92 subscription is checked here (it must compile, see
sql92_parse.py); the broker evaluates it on each message's properties
(actors/broker/dispatch/message_filter.py). Other expression types are refused.
"""

from __future__ import annotations

import attrs

from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.message import tags_hash_code
from rocketrio.protocol.sql92_parse import EXPRESSION_SQL92, Sql92ParseError, parse_sql92

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"


@attrs.define
class CheckClientRequestBody:
    """The body of CHECK_CLIENT_CONFIG (46): a consumer asks whether the broker can filter by
    its subscription before it starts."""

    clientId: str | None = None
    group: str | None = None
    subscriptionData: SubscriptionData | None = None


def is_tag_type(expression_type: str | None) -> bool:
    """Upstream ExpressionType.isTagType: no type, an empty one or TAG."""
    return not expression_type or expression_type == EXPRESSION_TAG


class SubscriptionParseError(ValueError):
    """A subscription expression this broker cannot evaluate."""


def build_subscription(
    topic: str, sub_string: str | None, expression_type: str | None = None, sub_version: int = 0
) -> SubscriptionData:
    """Parse a subscription like upstream's FilterAPI.build (TAG or SQL92)."""
    etype = (expression_type or EXPRESSION_TAG).upper()
    if etype == EXPRESSION_SQL92:
        if not sub_string:
            raise SubscriptionParseError(f"Expression can't be null! {etype}")
        try:
            parse_sql92(sub_string)
        except Sql92ParseError as e:
            raise SubscriptionParseError(e.java_message) from e
        return SubscriptionData(
            topic=topic, subString=sub_string, subVersion=sub_version, expressionType=etype
        )
    if etype != EXPRESSION_TAG:
        raise SubscriptionParseError(
            f"The broker does not support consumer to filter message by {etype}; use TAG or SQL92"
        )
    text = (sub_string or "").strip()
    if not text or text == SUB_ALL:
        return SubscriptionData(topic=topic, subString=SUB_ALL, subVersion=sub_version)
    tags = [t.strip() for t in text.split("||")]
    tags = [t for t in tags if t]
    if not tags:
        raise SubscriptionParseError(f"subscription {sub_string!r} names no tag")
    return SubscriptionData(
        topic=topic,
        subString=text,
        tagsSet=tags,
        codeSet=[tags_hash_code(t) for t in tags],
        subVersion=sub_version,
    )


def tag_codes_of(sub: SubscriptionData) -> set[int] | None:
    """The set of tag codes to match, or None for "every message"."""
    if sub.subString == SUB_ALL or (not sub.tagsSet and not sub.codeSet):
        return None
    if sub.codeSet:
        return set(sub.codeSet)
    return {tags_hash_code(t) for t in sub.tagsSet}
