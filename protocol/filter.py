"""Tag subscriptions (upstream FilterAPI): "tagA || tagB" or "*" -> SubscriptionData, tag codes.

The ConsumeQueue stores each message's tagsCode (Java String.hashCode of its TAGS), so the
broker filters by hash code and the client re-checks the tag string (hash collisions are the
client's to drop, like upstream). Only TAG expressions exist here; SQL92 needs property
filtering, which this broker does not offer and says so.
"""

from __future__ import annotations

from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.message import tags_hash_code

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"


class SubscriptionParseError(ValueError):
    """A subscription expression this broker cannot evaluate."""


def build_subscription(
    topic: str, sub_string: str | None, expression_type: str | None = None, sub_version: int = 0
) -> SubscriptionData:
    """Parse a subscription like upstream's FilterAPI.build (TAG type only)."""
    etype = (expression_type or EXPRESSION_TAG).upper()
    if etype != EXPRESSION_TAG:
        raise SubscriptionParseError(
            f"The broker does not support consumer to filter message by {etype}; use TAG"
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
