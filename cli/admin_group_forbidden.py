"""`rocketrio admin updateAndGetGroupReadForbidden` (MQAdminExt's updateAndGetGroupReadForbidden;
5.2.0's mqadmin has no sub-command for it): UPDATE_AND_GET_GROUP_FORBIDDEN (353) to one broker
(``-b``) or every master of a cluster (``-c``). With ``-r true|false`` the group's read of the
topic is allowed or forbidden on that broker; without it the current value is only read. One
line per broker: ``addr: group[G] topic[T] readable[true|false]``.

With ``-c``, a master that refuses or does not answer is reported and the others are still
asked; the exit status is then 1.
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.cli.admin import Incomplete, command
from rocketrio.cli.failure import one_line
from rocketrio.protocol.bodies import GroupForbidden
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.headers import UpdateGroupForbiddenRequestHeader
from rocketrio.protocol.serde import from_json


def _readable(text: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"readable must be true or false, not {text!r}")
    return low == "true"


def _args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("-b", "--brokerAddr", dest="broker", help="this broker address")
    g.add_argument("-c", "--clusterName", dest="cluster", help="every master of this cluster")
    p.add_argument("-g", "--groupName", dest="group", required=True)
    p.add_argument("-t", "--topicName", dest="topic", required=True)
    p.add_argument("-r", "--readable", type=_readable, default=None,
                   help="true: allow, false: forbid; omitted: only read")  # fmt: skip


@attrs.frozen
class ForbiddenAnswers:
    lines: list[str]


def _print(result: ForbiddenAnswers, _a: argparse.Namespace) -> None:
    print("\n".join(result.lines))


def _line(addr: str, f: GroupForbidden) -> str:
    readable = "true" if f.readable else "false"
    return f"{addr}: group[{f.group}] topic[{f.topic}] readable[{readable}]"


@command(
    "updateAndGetGroupReadForbidden",
    "forbid or allow a group to read a topic on a broker (or read whether it may)",
    _print,
)(_args)
async def update_and_get_group_read_forbidden(
    admin: Any, a: argparse.Namespace
) -> ForbiddenAnswers | Incomplete:
    header = UpdateGroupForbiddenRequestHeader(a.group.strip(), a.topic.strip(), a.readable)
    addrs = [a.broker] if a.broker else list(await admin.masters_of_cluster(a.cluster))
    lines, failed = [], []
    for addr in addrs:
        try:
            resp = await admin.api.call(addr, RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN, header)
        except (MQClientError, RemotingError) as e:
            if a.broker:
                raise
            failed.append(f"{addr}: {one_line(str(e))}")
            continue
        lines.append(_line(addr, from_json(GroupForbidden, resp.body)))
    if failed:
        return Incomplete(ForbiddenAnswers(lines), "failed on " + "; ".join(failed))
    return ForbiddenAnswers(lines)
