"""The replication options a seed of the whole-cluster simulation draws (issue 26 item 2).

`ReplicationDraw.draw(seed, set_sizes)` picks, from an RNG of its own (so the cluster, the faults
and the clients of a seed stay what `SimSpec.draw` made them), the broker keys the two sets run
with and the clients' mix:

- **ack mode**: allAckInSyncStateSet on (rocketrio's default), or off with inSyncReplicas k of
  1-3 and minInSyncReplicas 1 or k (each clipped to the voting replicas of a set);
- **asyncLearner**: the last broker of a 3-replica set may be a learner (replicates, never joins
  the SyncStateSet, never elected);
- **batch share**: the share of sends that are SEND_BATCH_MESSAGE batches of 1-4 messages;
- **push fail share**: the share of first deliveries the PushConsumer's listener answers
  RECONSUME_LATER (the message goes back through the retry topic, during faults too);
- **orderly**: whether an OrderlyPushConsumer group consumes too (per-queue order checked).

The rule each option promises, which the checker applies (`weak_sets`):

- allAckInSyncStateSet on, or off with k >= the set's voting replicas: every member that may be
  in the controller's SyncStateSet holds an acknowledged message, so whoever is elected has it:
  **nothing acknowledged is ever lost**, whatever the faults (the learner never counts);
- off with k < the set's voting replicas: an acknowledged message is on k replicas, and a master
  elected from the rest may lack it (upstream's quorum policy; rocketrio adds a lease so two
  masters never count partial acks at once): **an acknowledged message may be lost only across
  a later failover of its set** (a masterEpoch above the one it was acknowledged in); it is
  never lost without one, its queue offset is reused only by a later epoch, and a consumed
  message is never lost (ConsumeQueues are dispatched only below confirmOffset, which every
  possible member holds);
- batches: every message of an acknowledged batch is at its own queue offset, under the rule
  of the set's ack mode.
"""

from __future__ import annotations

import random

import attrs

SETS = ("broker-a", "broker-b")
DRAW_SALT = 0x0A7105  # the options' RNG: seed ^ DRAW_SALT


@attrs.frozen
class ReplicationDraw:
    all_ack: bool = True
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1
    learner_sets: tuple[str, ...] = ()  # sets whose last broker is an asyncLearner
    batch_share: float = 0.0
    push_fail_share: float = 0.0
    orderly: bool = False  # an OrderlyPushConsumer group too (cluster_push.py)

    @classmethod
    def draw(cls, seed: int, set_sizes: tuple[int, int]) -> ReplicationDraw:
        rng = random.Random(seed ^ DRAW_SALT)
        all_ack = rng.random() < 0.5
        k = rng.choice((1, 2, 2, 3))
        min_k = rng.choice((1, k))
        learners = tuple(
            s for s, n in zip(SETS, set_sizes, strict=True) if rng.random() < 0.35 and n == 3
        )
        return cls(
            all_ack=all_ack,
            in_sync_replicas=k,
            min_in_sync_replicas=min_k,
            learner_sets=learners,
            batch_share=rng.choice((0.0, 0.0, 0.25, 0.5, 1.0)),
            push_fail_share=rng.choice((0.0, 0.05, 0.2)),
            orderly=rng.random() < 0.35,
        )

    def voters(self, set_name: str, size: int) -> int:
        return size - (1 if set_name in self.learner_sets else 0)

    def overrides(self, set_name: str, k: int, size: int) -> tuple[tuple[str, object], ...]:
        """BrokerConfig keys of broker ``k`` of a set of ``size`` replicas."""
        keys: list[tuple[str, object]] = []
        if not self.all_ack:
            n = self.voters(set_name, size)
            keys += [
                ("allAckInSyncStateSet", False),
                ("inSyncReplicas", min(self.in_sync_replicas, n)),
                ("minInSyncReplicas", min(self.min_in_sync_replicas, n)),
            ]
        if set_name in self.learner_sets and k == size - 1:
            keys.append(("asyncLearner", True))
        return tuple(keys)

    def learner(self, set_name: str, size: int) -> str | None:
        """The process name of the set's learner, if it has one."""
        return f"{set_name}-{size - 1}" if set_name in self.learner_sets else None

    def weak_sets(self, set_sizes: tuple[int, int]) -> dict[str, str]:
        """Sets where an acknowledged message may be lost across a later failover (see the
        module docstring), with the rule's reason."""
        out = {}
        for s, size in zip(SETS, set_sizes, strict=True):
            n = self.voters(s, size)
            if not self.all_ack and self.in_sync_replicas < n:
                out[s] = f"inSyncReplicas={self.in_sync_replicas} of {n} voting replicas"
        return out

    def describe(self) -> str:
        ack = (
            "allAck"
            if self.all_ack
            else f"inSyncReplicas={self.in_sync_replicas} min={self.min_in_sync_replicas}"
        )
        learners = ",".join(self.learner_sets) or "none"
        return (
            f"{ack}, learner {learners}, batch share {self.batch_share}, "
            f"push fail share {self.push_fail_share}, orderly group {self.orderly}"
        )
