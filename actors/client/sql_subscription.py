"""SQL92 subscriptions on the client side (upstream MessageSelector.bySql, FilterAPI.build and
MQClientInstance.checkClientInBroker).

A SQL92 subscription carries its expression as is (type SQL92, no tags): the broker compiles and
evaluates it on each message's properties, and the client does not re-check it. Before a consumer
starts, each SQL92 subscription is shown to a broker serving its topic with CHECK_CLIENT_CONFIG
(46), so a broker without enablePropertyFilter, or an expression that does not compile, fails
`start()` with the broker's code and remark (`MQBrokerError`), as upstream's client does.
"""

from __future__ import annotations

from collections.abc import Iterable

from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.subscription import build_subscription
from rocketrio.protocol.bodies import SubscriptionData, TopicRouteData
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.filter import CheckClientRequestBody, is_tag_type
from rocketrio.protocol.serde import to_json
from rocketrio.protocol.sql92_parse import EXPRESSION_SQL92

MASTER_ID = 0


def build_sql_subscription(topic: str, sql: str, sub_version: int) -> SubscriptionData:
    """A SQL92 subscription (upstream FilterAPI.build with type SQL92)."""
    if not sql or not sql.strip():
        raise MQClientError(f"Expression can't be null! {EXPRESSION_SQL92}")
    return SubscriptionData(
        topic=topic, subString=sql, subVersion=sub_version, expressionType=EXPRESSION_SQL92
    )


def broker_of(route: TopicRouteData | None) -> str | None:
    """A master address serving the topic (upstream findBrokerAddrByTopic)."""
    for bd in route.brokerDatas if route else []:
        addr = bd.brokerAddrs.get(MASTER_ID) or next(iter(bd.brokerAddrs.values()), None)
        if addr:
            return addr
    return None


def subscription_of(topic: str, expr: str, sql: str | None, sub_version: int) -> SubscriptionData:
    """A consumer's subscription: by tags (``expr``), or by a SQL92 selector when ``sql``."""
    if sql is not None:
        return build_sql_subscription(topic, sql, sub_version)
    return build_subscription(topic, expr, sub_version)


async def check_client_in_broker(
    client: MQClientInstance, group: str, subs: Iterable[SubscriptionData]
) -> None:
    """CHECK_CLIENT_CONFIG for every non-TAG subscription; raises on the first refusal."""
    for sub in subs:
        if is_tag_type(sub.expressionType):
            continue
        addr = broker_of(client.routes.get(sub.topic))
        if addr is None:
            continue  # no route yet: upstream checks nothing either
        body = CheckClientRequestBody(clientId=client.client_id, group=group, subscriptionData=sub)
        await client.api.call(addr, RequestCode.CHECK_CLIENT_CONFIG, body=to_json(body))
