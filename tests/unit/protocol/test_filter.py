"""Subscriptions and tag filters (protocol/filter.py): building SubscriptionData, tag codes, SQL92
subscriptions checked (they must compile), other expression types refused with a reason.
"""

from __future__ import annotations

import pytest

from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.filter import (
    SubscriptionParseError,
    build_subscription,
    tag_codes_of,
)


@pytest.mark.parametrize(
    ("expr", "tags"),
    [("*", None), ("", None), (None, None), ("a", ["a"]), (" a || b ||c ", ["a", "b", "c"])],
)
def test_build_subscription(expr: str | None, tags: list[str] | None) -> None:
    sub = build_subscription("T", expr)
    if tags is None:
        assert sub.subString == "*" and tag_codes_of(sub) is None
    else:
        assert sub.tagsSet == tags
        # Java String.hashCode of the tags
        java = {"a": 97, "b": 98, "c": 99}
        assert tag_codes_of(sub) == {java[t] for t in tags}


def test_sql92_is_checked_and_other_types_refused() -> None:
    sub = build_subscription("T", "a > 1", "sql92", sub_version=3)
    assert (sub.expressionType, sub.subString, sub.subVersion) == ("SQL92", "a > 1", 3)
    assert tag_codes_of(sub) is None  # not a tag filter: the broker judges properties
    with pytest.raises(SubscriptionParseError, match="ParseException"):
        build_subscription("T", "a >", "SQL92")
    with pytest.raises(SubscriptionParseError, match="can't be null"):
        build_subscription("T", "", "SQL92")
    with pytest.raises(SubscriptionParseError, match="by XPATH"):
        build_subscription("T", "a", "XPATH")
    with pytest.raises(SubscriptionParseError):
        build_subscription("T", "||")


def test_tag_codes_from_tags_only() -> None:
    # "TagA".hashCode() in Java: ((84 * 31 + 97) * 31 + 103) * 31 + 65
    assert tag_codes_of(SubscriptionData("T", "TagA", tagsSet=["TagA"])) == {2_598_919}
