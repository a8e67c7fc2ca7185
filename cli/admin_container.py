"""`rocketrio admin addBroker` / `removeBroker`: a broker container's members (mqadmin's names
and options; actors/broker/container/).

    rocketrio admin addBroker -c CONTAINER_ADDR -b /path/on/the/container/host/broker.conf
    rocketrio admin removeBroker -c CONTAINER_ADDR -b clusterName:brokerName:brokerId

The config path is read by the container, on its host. A refusal (duplicate broker, port or
store already used, bad file, unknown broker) prints the container's remark and exits 1.
"""

from __future__ import annotations

import argparse
from typing import Any

from rocketrio.actors.broker.container.registry import BrokerIdentity, ContainerError
from rocketrio.actors.client.errors import UsageError
from rocketrio.cli.admin import command, print_done
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.container_headers import AddBrokerRequestHeader, RemoveBrokerRequestHeader

# the container answers once the broker serves (store recovered) or has stopped gracefully
CALL_TIMEOUT_S = 120.0


def _add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--container", required=True, help="broker container address")
    p.add_argument("-b", "--broker-config", required=True, help="broker config path (its host)")


@command("addBroker", "add a broker to a broker container", print_done)(_add_args)
async def add_broker(admin: Any, a: argparse.Namespace) -> str:
    header = AddBrokerRequestHeader(configPath=a.broker_config)
    await admin.api.call(a.container, RequestCode.ADD_BROKER, header, timeout_s=CALL_TIMEOUT_S)
    return f"add broker to {a.container} success"


def _remove_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--container", required=True, help="broker container address")
    p.add_argument(
        "-b",
        "--broker-identity",
        required=True,
        help="the broker: clusterName:brokerName:brokerId",
    )


@command("removeBroker", "remove a broker from a broker container", print_done)(_remove_args)
async def remove_broker(admin: Any, a: argparse.Namespace) -> str:
    try:
        who = BrokerIdentity.parse(a.broker_identity)
    except ContainerError as e:
        raise UsageError(str(e)) from None
    header = RemoveBrokerRequestHeader(who.broker_name, who.cluster, who.broker_id)
    await admin.api.call(a.container, RequestCode.REMOVE_BROKER, header, timeout_s=CALL_TIMEOUT_S)
    return f"remove broker from {a.container} success"
