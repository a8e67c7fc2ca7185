"""Subscription expressions: ``"*"`` or ``"tagA || tagB"`` -> SubscriptionData, and the
client-side tag check.

The broker filters by tag hash code (the ConsumeQueue's tagsCode), so two tags with the same
Java hash both pass; the client re-checks the tag string, like upstream's PullAPIWrapper.
"""

from __future__ import annotations

from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.message import PROPERTY_TAGS, MessageExt, tags_hash_code

SUB_ALL = "*"


def parse_tags(expr: str | None) -> list[str]:
    """Tags of an expression, in order, without duplicates; [] means every tag."""
    if expr is None or not expr.strip() or expr.strip() == SUB_ALL:
        return []
    tags: list[str] = []
    for part in expr.split("||"):
        tag = part.strip()
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def build_subscription(topic: str, expr: str | None, sub_version: int) -> SubscriptionData:
    """Upstream FilterAPI.buildSubscriptionData (expression type TAG)."""
    tags = parse_tags(expr)
    if not tags:
        return SubscriptionData(topic=topic, subString=SUB_ALL, subVersion=sub_version)
    return SubscriptionData(
        topic=topic,
        subString=" || ".join(tags),
        tagsSet=tags,
        codeSet=[tags_hash_code(t) for t in tags],
        subVersion=sub_version,
    )


def filter_by_tags(msgs: list[MessageExt], sub: SubscriptionData) -> list[MessageExt]:
    """Keep the messages whose tag is in the subscription (all of them for ``*``)."""
    if not sub.tagsSet:
        return msgs
    wanted = set(sub.tagsSet)
    return [m for m in msgs if m.properties.get(PROPERTY_TAGS) in wanted]
