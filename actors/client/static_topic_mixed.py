"""A static topic never spans rocketrio and Java brokers (issue 30 item 5; the decision is in
docs/static-topics.md, "Offsets").

rocketrio keeps a static topic's consumer offsets as logic values under the logic queue id on
the logic queue's leader and finds them by Double-Check-Read; upstream (Java 5.x) keeps physical
values under the physical queue id on the item's broker. Brokers of both kinds holding items of
one static topic would each read the other's entries wrongly (a logic offset taken for a
physical one, or missed), so a group's position could jump or go back at a remapping. Before a
plan is sent, every broker it names is asked (GET_TOPIC_CONFIG, which every broker answers) and
the language of its answer tells the kind (a Java broker answers JAVA, rocketrio PYTHON); any
other than rocketrio's refuses the whole plan, naming the brokers, and nothing is sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.errors import MQClientError
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import GetTopicConfigRequestHeader

ROCKETRIO_LANGUAGE = "PYTHON"  # what rocketrio's brokers answer with (RemotingCommand)


async def refuse_mixed_cluster(
    admin: MQAdmin, topic: str, brokers: Iterable[str], masters: Mapping[str, str]
) -> None:
    """MQClientError when a broker of ``brokers`` is not a rocketrio broker."""
    others = []
    for broker in sorted(brokers):
        resp = await admin.api.call(
            masters[broker],
            RequestCode.GET_TOPIC_CONFIG,
            GetTopicConfigRequestHeader(topic, lo=True),
            ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST),
        )
        if resp.language != ROCKETRIO_LANGUAGE:
            others.append(f"{broker} (answers as {resp.language})")
    if others:
        raise MQClientError(
            f"static topic {topic}: brokers {', '.join(others)} are not rocketrio brokers. A "
            "static topic cannot span rocketrio and Java brokers: rocketrio keeps its consumer "
            "offsets as logic values on each logic queue's leader, Java brokers keep physical "
            "values on each generation's broker (docs/static-topics.md); nothing was sent"
        )
