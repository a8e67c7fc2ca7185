"""The console's admin actions and the token that guards them.

An `Action` from the page is carried out only when the console was started with a token file
and the message carries that token (compared with `hmac.compare_digest`, so the comparison takes
the same time wherever the first difference is). The check is here, on the server: a page that
shows buttons to anybody grants nothing. Each action's arguments are a typed record (unknown or
missing keys, wrong types and bad names are refused with the reason); the work is done by the
same admin API as ``rocketrio admin`` (MQAdmin, ControllerAdmin, offset_admin). Every action,
refused or done, is logged as one ``console_action`` audit event with its peer and result.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

import attrs
import cattrs
import structlog
from cattrs.v import format_exception

from rocketrio.actors.broker.tables.topic_config import check_group_name, check_topic_name
from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.controller_admin import ControllerAdmin
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.offset_admin import (
    SKIP_ACCUMULATED,
    reset_offset_by_timestamp,
)
from rocketrio.actors.console.model import queue_lag
from rocketrio.actors.console.protocol import Action, ActionResult
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import MessageQueue, SubscriptionGroupConfig

log = structlog.get_logger("console")

MAX_QUEUES = 1024
MIN_TOKEN_CHARS = 16


class ActionRefused(Exception):
    """An action that is not carried out; the text says why."""


def load_token(path: str) -> str:
    """The token in ``path`` (surrounding whitespace dropped); ValueError when the file is
    unreadable or the token too short to be a secret."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as e:
        raise ValueError(f"token file {path}: {e.strerror or e}") from None
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(
            f"token file {path}: the token has {len(token)} characters; "
            f"at least {MIN_TOKEN_CHARS} are needed"
        )
    return token


def token_matches(expected: str | None, given: str) -> bool:
    """Constant-time comparison; always False when the console has no token."""
    if expected is None:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


# -- typed arguments --------------------------------------------------------------------------


def _topic(_: Any, __: Any, value: str) -> None:
    if (err := check_topic_name(value)) is not None:
        raise ValueError(f"topic {value!r}: {err}")


def _group(_: Any, __: Any, value: str) -> None:
    if (err := check_group_name(value)) is not None:
        raise ValueError(f"group {value!r}: {err}")


def _queues(_: Any, a: attrs.Attribute[int], value: int) -> None:
    if not 1 <= value <= MAX_QUEUES:
        raise ValueError(f"{a.name} must be 1..{MAX_QUEUES}, got {value}")


def _perm(_: Any, __: Any, value: int) -> None:
    if value not in (2, 4, 6):
        raise ValueError(f"perm must be 2 (write), 4 (read) or 6 (read and write), got {value}")


@attrs.frozen(kw_only=True)
class UpdateTopic:
    topic: str = attrs.field(validator=_topic)
    cluster: str
    readQueueNums: int = attrs.field(default=8, validator=_queues)
    writeQueueNums: int = attrs.field(default=8, validator=_queues)
    perm: int = attrs.field(default=6, validator=_perm)
    order: bool = False


@attrs.frozen(kw_only=True)
class DeleteTopic:
    topic: str = attrs.field(validator=_topic)
    cluster: str


@attrs.frozen(kw_only=True)
class UpdateSubGroup:
    group: str = attrs.field(validator=_group)
    cluster: str
    consumeEnable: bool = True
    consumeBroadcastEnable: bool = True
    consumeMessageOrderly: bool = False
    retryMaxTimes: int = 16


@attrs.frozen(kw_only=True)
class ResetOffset:
    """``timestamp`` epoch ms, or -1 for "skip what accumulated" (each queue's max offset)."""

    group: str = attrs.field(validator=_group)
    topic: str = attrs.field(validator=_topic)
    timestamp: int
    force: bool = True


@attrs.frozen(kw_only=True)
class ElectMaster:
    cluster: str
    brokerName: str
    brokerId: int


@attrs.frozen(kw_only=True)
class CleanBrokerMetadata:
    cluster: str
    brokerName: str
    brokerIds: str = ""  # "1;2"; empty: the whole set
    cleanLivingBroker: bool = False


ARGS: dict[str, type] = {
    "updateTopic": UpdateTopic,
    "deleteTopic": DeleteTopic,
    "updateSubGroup": UpdateSubGroup,
    "previewResetOffset": ResetOffset,
    "resetOffset": ResetOffset,
    "electMaster": ElectMaster,
    "cleanBrokerMetadata": CleanBrokerMetadata,
}
_conv = cattrs.Converter(forbid_extra_keys=True)


def _why(exc: BaseException, type_: Any) -> str:
    """cattrs' wording, but a validator's own message (raised with no field type) as is."""
    if type_ is None and isinstance(exc, ValueError):
        return str(exc)
    return format_exception(exc, type_)


def parse_args(action: str, args: dict[str, Any]) -> Any:
    """The typed arguments of ``action``; ActionRefused naming what is wrong."""
    cls = ARGS.get(action)
    if cls is None:
        raise ActionRefused(f"unknown action {action!r}")
    try:
        return _conv.structure(args, cls)
    except cattrs.BaseValidationError as e:
        lines = cattrs.transform_error(e, format_exception=_why)
        raise ActionRefused(f"{action}: " + "; ".join(lines)) from None
    except (TypeError, ValueError) as e:
        raise ActionRefused(f"{action}: {e}") from None


# -- carrying them out ------------------------------------------------------------------------


class ActionRunner:
    """Checks the token and carries out one action through the admin clients."""

    def __init__(
        self, admin: MQAdmin, controller: ControllerAdmin | None, token: str | None
    ) -> None:
        self.admin = admin
        self.controller = controller
        self.token = token

    async def run(self, msg: Action, peer: str) -> ActionResult:
        error, data = "", None
        try:
            if self.token is None:
                raise ActionRefused(
                    "this console is read-only: it was started without --token-file"
                )
            if not token_matches(self.token, msg.token):
                raise ActionRefused("wrong or missing token: actions need the console's token")
            args = parse_args(msg.action, msg.args)
            data = await self._carry_out(args, preview=msg.action == "previewResetOffset")
        except ActionRefused as e:
            error = str(e)
        except (MQClientError, RemotingError) as e:
            error = f"{msg.action} failed: {e}"
        ok = not error
        events.emit(
            log,
            events.ConsoleAction(
                action=msg.action,
                peer=peer,
                ok=ok,
                error=error or None,
                arguments=msg.args if len(str(msg.args)) <= 2048 else {"truncated": True},
            ),
            level="info" if ok else "warning",
        )
        return ActionResult(id=msg.id, ok=ok, error=error, data=data)

    async def _carry_out(self, args: Any, *, preview: bool) -> Any:
        admin = self.admin
        match args:
            case UpdateTopic():
                addrs = await admin.update_topic(
                    args.topic,
                    cluster=args.cluster,
                    read_queues=args.readQueueNums,
                    write_queues=args.writeQueueNums,
                    perm=args.perm,
                    order=args.order,
                )
                return {"brokers": addrs}
            case DeleteTopic():
                return {"brokers": await admin.delete_topic(args.topic, cluster=args.cluster)}
            case UpdateSubGroup():
                config = SubscriptionGroupConfig(
                    args.group,
                    consumeEnable=args.consumeEnable,
                    consumeBroadcastEnable=args.consumeBroadcastEnable,
                    consumeMessageOrderly=args.consumeMessageOrderly,
                    retryMaxTimes=args.retryMaxTimes,
                )
                addrs = await admin.masters_of_cluster(args.cluster)
                await admin.update_sub_group(config, addrs)
                return {"brokers": addrs}
            case ResetOffset() if preview:
                return await reset_preview(admin, args)
            case ResetOffset():
                result = await reset_offset_by_timestamp(
                    admin, args.group, args.topic, args.timestamp, args.force
                )
                return attrs.asdict(result)
            case ElectMaster():
                res = await self._controller().elect_master(
                    args.cluster, args.brokerName, args.brokerId
                )
                return {
                    "masterBrokerId": res.header.masterBrokerId,
                    "masterAddress": res.header.masterAddress,
                    "masterEpoch": res.header.masterEpoch,
                    "syncStateSetEpoch": res.header.syncStateSetEpoch,
                }
            case CleanBrokerMetadata():
                await self._controller().clean_broker_metadata(
                    args.cluster,
                    args.brokerName,
                    args.brokerIds or None,
                    args.cleanLivingBroker,
                )
                return {"cleaned": args.brokerIds or "all"}
            case _:
                raise ActionRefused(f"no handler for {type(args).__name__}")

    def _controller(self) -> ControllerAdmin:
        if self.controller is None:
            raise ActionRefused("this action needs the controller: start with --controller")
        return self.controller


async def reset_preview(admin: MQAdmin, args: ResetOffset) -> dict[str, Any]:
    """What resetOffset would do, without doing it: per queue of the topic's route the group's
    committed offset, the offset the timestamp points at, and the lag before and after."""
    route = await admin.topic_route(args.topic)
    queues: list[dict[str, Any]] = []
    for bd in sorted(route.brokerDatas, key=lambda b: b.brokerName):
        addr = bd.select_broker_addr()
        if addr is None:
            continue
        stats = (await admin.consume_stats(addr, args.group, args.topic)).offsetTable
        reads = next(
            (q.readQueueNums for q in route.queueDatas if q.brokerName == bd.brokerName), 0
        )
        for qid in range(reads):
            mq = MessageQueue(args.topic, bd.brokerName, qid)
            max_offset = await admin.api.get_max_offset(addr, mq)
            target = (
                max_offset
                if args.timestamp == SKIP_ACCUMULATED
                else await admin.api.search_offset(addr, mq, args.timestamp)
            )
            w = stats.get(mq)
            current = w.consumerOffset if w is not None else -1
            queues.append(
                {
                    "brokerName": bd.brokerName,
                    "queueId": qid,
                    "brokerOffset": max_offset,
                    "consumerOffset": current,
                    "newOffset": target,
                    "lagBefore": queue_lag(max_offset, current),
                    "lagAfter": queue_lag(max_offset, target),
                }
            )
    return {
        "queues": queues,
        "lagBefore": sum(q["lagBefore"] for q in queues),
        "lagAfter": sum(q["lagAfter"] for q in queues),
    }
