"""The admin calls behind the config and permission commands of ``rocketrio admin`` (upstream
DefaultMQAdminExt: getBrokerConfig / updateBrokerConfig, getNameServerConfig /
updateNameServerConfig, getControllerConfig / updateControllerConfig, wipeWritePermOfBroker /
addWritePermOfBroker, examineTopicConfig + createAndUpdateTopicConfig for updateTopicPerm).

Functions over an open `MQAdmin` (or, for the controller, a `ControllerAdmin`), each returning
typed values; a server's refusal raises `MQBrokerError` with its code and remark. Update
bodies are properties text, one ``key=value`` line per key, as upstream's
MixAll.properties2String writes them. The controller calls go to each address given, not to
the leader: a config change is a replica's own (upstream).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from rocketrio.actors.client.admin import MQAdmin, broker_names_of
from rocketrio.actors.client.api import request
from rocketrio.actors.client.config import MASTER_ID
from rocketrio.actors.client.controller_admin import ControllerAdmin, split_addrs
from rocketrio.actors.client.errors import MQBrokerError, NotFound, UsageError
from rocketrio.protocol.bodies import TopicConfig
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.config import parse_properties
from rocketrio.protocol.headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    CreateTopicRequestHeader,
    GetTopicConfigRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from rocketrio.protocol.serde import from_ext, from_json


@attrs.frozen
class BrokerTarget:
    """One broker a command is sent to: its address and what the name server calls it."""

    addr: str
    broker_name: str = ""
    broker_id: int | None = None

    @property
    def label(self) -> str:
        if self.broker_id is None:
            return self.addr
        role = "master" if self.broker_id == MASTER_ID else f"slave brokerId {self.broker_id}"
        return f"{self.broker_name} {role} {self.addr}"


@attrs.frozen
class ServerConfig:
    """getBrokerConfig / getNamesrvConfig / getControllerConfig: one server's key=value lines."""

    server: str  # address, or broker label
    values: dict[str, str]


def properties_body(values: Mapping[str, str]) -> bytes:
    """MixAll.properties2String: one ``key=value`` line per key."""
    return "".join(f"{k}={v}\n" for k, v in values.items()).encode()


def _kv(body: bytes, what: str) -> dict[str, str]:
    return parse_properties(body.decode("utf-8"), what)


# -- brokers ------------------------------------------------------------------------------------


async def brokers_of_cluster(
    admin: MQAdmin, cluster: str, *, with_slaves: bool
) -> list[BrokerTarget]:
    """The masters of ``cluster`` (and their slaves), by broker name then brokerId."""
    info = await admin.cluster_info()
    out = []
    for name in broker_names_of(info, cluster):
        bd = info.brokerAddrTable.get(name)
        for bid, addr in sorted(bd.brokerAddrs.items()) if bd is not None else ():
            if bid == MASTER_ID or with_slaves:
                out.append(BrokerTarget(addr, name, bid))
    if not out:
        raise NotFound(f"cluster {cluster} has no broker registered at the name server")
    return out


async def get_broker_config(admin: MQAdmin, target: BrokerTarget) -> ServerConfig:
    resp = await admin.api.call(target.addr, RequestCode.GET_BROKER_CONFIG)
    return ServerConfig(target.label, _kv(resp.body, f"config of broker {target.addr}"))


async def update_broker_config(admin: MQAdmin, addr: str, values: Mapping[str, str]) -> str | None:
    """UPDATE_BROKER_CONFIG; returns the broker's remark (set when the change is live only)."""
    resp = await admin.api.call(
        addr, RequestCode.UPDATE_BROKER_CONFIG, body=properties_body(values)
    )
    return resp.remark


async def delete_expired_commitlog(admin: MQAdmin, addr: str) -> None:
    """DELETE_EXPIRED_COMMITLOG (329): the broker's next clean-up rounds delete expired
    CommitLog segments whatever its deleteWhen says."""
    await admin.api.call(addr, RequestCode.DELETE_EXPIRED_COMMITLOG)


async def topic_config(admin: MQAdmin, addr: str, topic: str) -> TopicConfig:
    """GET_TOPIC_CONFIG (351): the topic as this broker holds it."""
    resp = await admin.api.call(
        addr, RequestCode.GET_TOPIC_CONFIG, GetTopicConfigRequestHeader(topic)
    )
    return from_json(TopicConfig, resp.body)


async def update_topic_config(admin: MQAdmin, addr: str, tc: TopicConfig) -> None:
    """UPDATE_AND_CREATE_TOPIC with every field of ``tc`` (createAndUpdateTopicConfig)."""
    header = CreateTopicRequestHeader(
        topic=tc.topicName,
        defaultTopic="TBW102",
        readQueueNums=tc.readQueueNums,
        writeQueueNums=tc.writeQueueNums,
        perm=tc.perm,
        topicFilterType=tc.topicFilterType,
        topicSysFlag=tc.topicSysFlag,
        order=tc.order,
    )
    await admin.api.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)


# -- name servers -------------------------------------------------------------------------------


async def get_namesrv_config(admin: MQAdmin, addr: str) -> ServerConfig:
    resp = await admin.api.call(addr, RequestCode.GET_NAMESRV_CONFIG)
    return ServerConfig(addr, _kv(resp.body, f"config of name server {addr}"))


async def update_namesrv_config(admin: MQAdmin, addr: str, values: Mapping[str, str]) -> None:
    await admin.api.call(addr, RequestCode.UPDATE_NAMESRV_CONFIG, body=properties_body(values))


async def wipe_write_perm(admin: MQAdmin, namesrv: str, broker_name: str) -> int:
    """WIPE_WRITE_PERM_OF_BROKER (205) on one name server: how many topics lost W."""
    resp = await admin.api.call(
        namesrv,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        WipeWritePermOfBrokerRequestHeader(broker_name),
    )
    return from_ext(WipeWritePermOfBrokerResponseHeader, resp.ext_fields).wipeTopicCount


async def add_write_perm(admin: MQAdmin, namesrv: str, broker_name: str) -> int:
    """ADD_WRITE_PERM_OF_BROKER (327) on one name server: how many topics got W back."""
    resp = await admin.api.call(
        namesrv,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        AddWritePermOfBrokerRequestHeader(broker_name),
    )
    return from_ext(AddWritePermOfBrokerResponseHeader, resp.ext_fields).addTopicCount


# -- controllers --------------------------------------------------------------------------------


def controller_addrs(admin: ControllerAdmin) -> list[str]:
    if admin.link is None:
        raise UsageError("this command needs the controller address (-a host:port)")
    return split_addrs(admin.link.addrs)


async def _controller_call(
    admin: ControllerAdmin, addr: str, code: int, body: bytes = b""
) -> bytes:
    resp = await admin.remoting.invoke(addr, request(code, body=body), admin.timeout)
    if resp.code != ResponseCode.SUCCESS:
        raise MQBrokerError(resp.code, resp.remark, addr)
    return resp.body


async def get_controller_config(admin: ControllerAdmin, addr: str) -> ServerConfig:
    body = await _controller_call(admin, addr, RequestCode.GET_CONTROLLER_CONFIG)
    return ServerConfig(addr, _kv(body, f"config of controller {addr}"))


async def update_controller_config(
    admin: ControllerAdmin, addr: str, values: Mapping[str, str]
) -> None:
    await _controller_call(
        admin, addr, RequestCode.UPDATE_CONTROLLER_CONFIG, properties_body(values)
    )
