"""The controller's benchmark hook: the internal request code `CONTROLLER_BENCH_PROPOSE` (1199,
not an upstream code) proposes its body as a no-op Raft entry (tag 0xFFFF, which no controller
command uses) and is answered once the entry is committed and applied on the leader.
`bench/raft_commit.py` uses it to measure the Raft pipeline through the real request path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.kernel.runtime import Reply
from rocketrio.actors.raft.node import LeaderPendingFull, NotLeader, ProposalDropped, RaftNode
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.remoting import RemotingCommand

CONTROLLER_BENCH_PROPOSE = 1199
BENCH_ENTRY_TAG = b"\xff\xff"
MAX_BENCH_BODY = 64 * 1024


def bench_propose(
    node: RaftNode, ctx: RequestContext, not_leader_remark: Callable[[], str]
) -> RemotingCommand | None:
    """Propose the request's body; None when the answer comes once the entry is applied."""
    body = ctx.cmd.body
    if not body or len(body) > MAX_BENCH_BODY:
        return ctx.cmd.make_response(
            RC.INVALID_PARAMETER, f"bench entries carry 1..{MAX_BENCH_BODY} bytes"
        )
    if not node.is_ready_leader:
        return ctx.cmd.make_response(RC.CONTROLLER_NOT_LEADER, not_leader_remark())

    def done(reply: Reply[Any]) -> None:
        try:
            reply.result()
        except NotLeader:
            ctx.respond_code(RC.CONTROLLER_NOT_LEADER, not_leader_remark())
        except (LeaderPendingFull, ProposalDropped) as e:
            ctx.respond_code(RC.SYSTEM_BUSY, str(e))
        else:
            ctx.respond_code(RC.SUCCESS)

    if not node.propose_nowait(BENCH_ENTRY_TAG + body, Reply(on_done=done)):
        return ctx.cmd.make_response(RC.SYSTEM_BUSY, "controller inbox full")
    return None
