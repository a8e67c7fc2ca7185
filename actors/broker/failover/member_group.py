"""The calls a classic broker makes to learn its group (RIP-32, SPEC A2/N3): I/O only; the
decisions are acting_core.py's.

- `fetch_member_group`: the live members from the first NameServer that answers, by
  GET_BROKER_MEMBER_GROUP (901) or, with compatibleWithOldNameSrv (upstream's default), by the
  route of ``rmq_sys_SYNC_BROKER_MEMBER_<brokerName>`` (GET_ROUTEINFO_BY_TOPIC 105), which a
  NameServer that predates 901 also answers; every broker registers that topic (perm 1).
- `pull_ha_info`: EXCHANGE_BROKER_HA_INFO (906) without masterHaAddress, asked of a master:
  its HA address, its max offset and its address (upstream onMasterOnline when the 905 did not
  carry the HA address).
- `ha_info_answer`: what this broker answers to a 906 pull (id 0: its HA address, max offset and
  address; anyone else: an empty SUCCESS, as upstream).
"""

from __future__ import annotations

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.protocol.bodies import GetBrokerMemberGroupResponseBody, TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    ExchangeHAInfoRequestHeader,
    ExchangeHAInfoResponseHeader,
    GetBrokerMemberGroupRequestHeader,
    GetRouteInfoRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, from_json, to_ext

SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"
CALL_TIMEOUT_S = 3.0  # upstream: invokeSync(..., 3000)


def request(code: int, header: object | None) -> RemotingCommand:
    return RemotingCommand(code=code, ext_fields={} if header is None else to_ext(header))


def sync_member_topic(broker_name: str) -> str:
    return SYNC_BROKER_MEMBER_GROUP_PREFIX + broker_name


def members_of_route(route: TopicRouteData, cluster: str, broker_name: str) -> dict[int, str]:
    """The members of ``broker_name`` in a compat-mode route (upstream
    getBrokerMemberGroupCompatible): the brokerAddrs of its BrokerData."""
    for bd in route.brokerDatas:
        if bd.brokerName == broker_name and bd.cluster == cluster:
            return {int(k): v for k, v in bd.brokerAddrs.items()}
    return {}


async def fetch_member_group(
    client: RemotingClient, config: BrokerConfig, *, compatible: bool
) -> dict[int, str] | None:
    """The live members (brokerId -> address) from the first NameServer that answers; None when
    none did (an empty dict: one answered, knowing no member)."""
    cluster, name = config.brokerClusterName, config.brokerName
    if compatible:
        cmd = request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            GetRouteInfoRequestHeader(topic=sync_member_topic(name), acceptStandardJsonOnly=True),
        )
    else:
        cmd = request(
            RequestCode.GET_BROKER_MEMBER_GROUP, GetBrokerMemberGroupRequestHeader(cluster, name)
        )
    for ns in config.namesrv_addrs:
        try:
            resp = await client.invoke(ns, cmd, CALL_TIMEOUT_S)
        except RemotingError:
            continue
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return {}
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            continue
        try:
            if compatible:
                return members_of_route(from_json(TopicRouteData, resp.body), cluster, name)
            group = from_json(GetBrokerMemberGroupResponseBody, resp.body).brokerMemberGroup
        except HeaderError:
            continue
        return {int(k): v for k, v in group.brokerAddrs.items()}
    return None


async def pull_ha_info(client: RemotingClient, master_addr: str) -> ExchangeHAInfoResponseHeader:
    """906 without masterHaAddress: the master's HA address, max offset and address."""
    cmd = request(RequestCode.EXCHANGE_BROKER_HA_INFO, ExchangeHAInfoRequestHeader())
    resp = await client.invoke(master_addr, cmd, CALL_TIMEOUT_S)
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingError(f"EXCHANGE_BROKER_HA_INFO from {master_addr}: {resp.remark}")
    try:
        return from_ext(ExchangeHAInfoResponseHeader, resp.ext_fields)
    except HeaderError as e:
        raise RemotingError(f"EXCHANGE_BROKER_HA_INFO from {master_addr}: {e}") from e


def ha_info_answer(
    config: BrokerConfig, addr: str, is_master: bool, max_offset: int
) -> ExchangeHAInfoResponseHeader:
    """This broker's answer to a 906 pull (module docstring)."""
    if not is_master:
        return ExchangeHAInfoResponseHeader()
    return ExchangeHAInfoResponseHeader(
        masterHaAddress=config.ha_addr, masterFlushOffset=max_offset, masterAddress=addr
    )
