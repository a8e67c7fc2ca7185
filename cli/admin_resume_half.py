"""`rocketrio admin resumeCheckHalfMessage -i MSG_ID [-b host:port]` (MQAdminExt's
resumeCheckHalfMessage; 5.2.0's mqadmin has no sub-command for it): RESUME_CHECK_HALF_MESSAGE
(323) to the broker that stored the message (the host:port inside the offset message id, as
upstream's tool finds it, unless ``-b`` names another address). The broker puts the half back
into its half queue with a check count of 0, so its producer is asked again.

Prints ``resume check half message MSG_ID success.``; a refusal is the broker's remark.
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from rocketrio.actors.client.errors import UsageError
from rocketrio.cli.admin import command
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.headers import ResumeCheckHalfMessageRequestHeader
from rocketrio.protocol.message import MessageDecodeError, parse_offset_msg_id


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True,
                   help="the half's offset message id (queryMsgById shows it)")  # fmt: skip
    p.add_argument("-b", "--brokerAddr", dest="broker", default=None,
                   help="the broker to ask (default: the store host in the id)")  # fmt: skip


@attrs.frozen
class Resumed:
    msg_id: str
    broker: str


def _print(result: Resumed, _a: argparse.Namespace) -> None:
    print(f"resume check half message {result.msg_id} success.")


@command("resumeCheckHalfMessage", "ask a half message's producer again (check count 0)", _print)(
    _args
)
async def resume_check_half_message(admin: Any, a: argparse.Namespace) -> Resumed:
    msg_id = a.msg_id.strip()
    addr = a.broker
    if addr is None:
        try:
            host, port, _offset = parse_offset_msg_id(msg_id)
        except MessageDecodeError as e:
            raise UsageError(f"{e} (give the offset message id, or -b)") from None
        addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    header = ResumeCheckHalfMessageRequestHeader(msg_id)
    await admin.api.call(addr, RequestCode.RESUME_CHECK_HALF_MESSAGE, header)
    return Resumed(msg_id, addr)
