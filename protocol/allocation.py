"""Queue allocation strategies: which of a topic's queues one consumer of a group owns, given every
queue and every consumer id of the group, both already sorted (queues by topic, broker name,
queue id; client ids as strings). Upstream's AllocateMessageQueueAveragely (``AVG``) and
AllocateMessageQueueAveragelyByCircle (``AVG_BY_CIRCLE``).

Every member of a group computes the same table from the same inputs (the client's rebalance,
actors/client/rebalance.py), and so does a broker answering QUERY_ASSIGNMENT for a member
(actors/broker/assign/allocation.py): the strategies are a contract between them, kept here once.
Pure. A client id that is not a member, or no queues, owns nothing; an empty client id is a
caller's error (ValueError).
"""

from __future__ import annotations

from collections.abc import Sequence

from rocketrio.protocol.bodies import MessageQueue


def _member_index(cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> int:
    """``cid``'s place among the consumers, or -1 when it owns nothing."""
    if not cid:
        raise ValueError("current client id is empty")
    if not mq_all or cid not in cid_all:
        return -1
    return cid_all.index(cid)


def allocate_averagely(
    cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AVG: contiguous blocks; the first ``len(mq_all) % len(cid_all)`` clients get one more."""
    index = _member_index(cid, mq_all, cid_all)
    if index < 0:
        return []
    n_mq, n_cid = len(mq_all), len(cid_all)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if (mod > 0 and index < mod) else index * average + mod
    return [mq_all[(start + i) % n_mq] for i in range(min(average, n_mq - start))]


def allocate_by_circle(
    cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """AVG_BY_CIRCLE: queue i to client i mod clients."""
    index = _member_index(cid, mq_all, cid_all)
    if index < 0:
        return []
    return [mq_all[i] for i in range(index, len(mq_all)) if i % len(cid_all) == index]
