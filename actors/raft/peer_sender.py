"""The Raft node's outgoing messages (DLedger's RPC service, sending side): one bounded queue
per peer, drained by its own task over one remoting connection.

Every message is one oneway RAFT_MESSAGE request whose body is the binary codec of
`protocol/raft.py`. The node never waits on a peer: `send` drops the message when that peer's
queue is full (Raft re-sends what matters: heartbeats, probes, retries). When a connection
fails, what is queued behind the failure is dropped too (stale by the retry), and the vote and
heartbeat requests among the lost ones are handed back (``on_unreachable``) so the core counts
them as UNKNOWN answers and ends those rounds without waiting for their deadline. A peer going
away and coming back is logged once each way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.raft import HeartBeatRequest, RaftMessage, VoteRequest, encode_message
from rocketrio.protocol.remoting import RemotingCommand

PEER_QUEUE_CAPACITY = 1024
PEER_SEND_BATCH = 256
PEER_RETRY_S = 0.05


class PeerSender:
    """The send queues of one node's peers (every member but itself) and their tasks."""

    def __init__(
        self,
        self_id: str,
        peers: dict[str, str],
        capacity: int,
        on_unreachable: Callable[[str, RaftMessage], bool],
        log: Any,
    ) -> None:
        self.peers = peers  # id -> address
        self._queues = {
            peer: trio.open_memory_channel[RaftMessage](capacity)
            for peer in peers
            if peer != self_id
        }
        # a lost vote or heartbeat request back to the node; False: its inbox is full
        self._on_unreachable = on_unreachable
        self.log = log
        self.dropped = 0  # messages a full queue turned away

    def start(self, nursery: trio.Nursery, client: RemotingClient) -> None:
        """One sending task per peer, over ``client``'s connections."""
        for peer, (_, recv) in self._queues.items():
            nursery.start_soon(self._drain, client, peer, self.peers[peer], recv)

    def send(self, to: str, msg: RaftMessage) -> None:
        queue = self._queues.get(to)
        if queue is None:
            return
        try:
            queue[0].send_nowait(msg)
        except trio.WouldBlock:
            self.dropped += 1  # the peer is slow or away; Raft retries

    def _report_unreachable(self, peer: str, lost: list[RaftMessage]) -> None:
        """Vote and heartbeat rounds count undeliverable requests as UNKNOWN answers (the
        core's `report_unreachable`), so they end without waiting for their deadline."""
        for msg in lost:
            if isinstance(msg, VoteRequest | HeartBeatRequest):
                if not self._on_unreachable(peer, msg):
                    return

    async def _drain(
        self,
        client: RemotingClient,
        peer: str,
        addr: str,
        recv: trio.MemoryReceiveChannel[RaftMessage],
    ) -> None:
        """Drain one peer's queue over one connection; on failure drop what is queued."""
        reachable = True
        while True:
            batch = [await recv.receive()]
            while len(batch) < PEER_SEND_BATCH:
                try:
                    batch.append(recv.receive_nowait())
                except trio.WouldBlock:
                    break
            sent = 0
            try:
                conn = await client.get_connection(addr)
                for msg in batch:
                    cmd = RemotingCommand(code=RequestCode.RAFT_MESSAGE, body=encode_message(msg))
                    await conn.oneway(cmd)
                    sent += 1
            except RemotingError as e:
                if reachable:
                    events.emit(
                        self.log, events.RaftPeerUnreachable(peer=peer, addr=addr, error=str(e))
                    )
                    reachable = False
                lost = batch[sent:]
                while True:  # what waited behind the failure is stale by the retry
                    try:
                        lost.append(recv.receive_nowait())
                    except trio.WouldBlock:
                        break
                self._report_unreachable(peer, lost)
                await trio.sleep(PEER_RETRY_S)
                continue
            if not reachable:
                events.emit(self.log, events.RaftPeerReachable(peer=peer, addr=addr))
                reachable = True
