"""UPDATE_BROKER_CONFIG (25): which broker keys change live, and how the running broker hears.

`BROKER_POLICY.live_keys` is the claim "the running broker uses the new value at once"; every
other key of `BrokerConfig` is refused as needing a restart (actors/kernel/live_update.py), because
something reads it only at start: the identity and addresses (brokerName, brokerId, listenPort,
haListenPort, brokerIP1, namesrvAddr ...), the store layout and its recovery (storePathRootDir,
mappedFileSize*, checkCRC*, messageDelayLevel ...), the role and the replication services
(brokerRole, enableControllerMode, the ha*, controller* and SyncStateSet keys), the ACL gate
(built at start), the remoting server limits, and the periods of loops started at boot
(brokerHeartbeatInterval also paces the controller heartbeats, flushConsumerOffsetInterval).

How each live key reaches the running broker (`apply_broker_changes`):

- brokerPermission, autoCreateTopicEnable, maxMessageSize: the send path's `SendConfig` and the
  pull path's `PullConfig` are rebuilt (brokerPermission without W refuses sends, without R
  pulls); brokerPermission also bumps the topic DataVersion and re-registers at once with the
  NameServers, each topic's perm masked by brokerPermission (upstream registerBrokerAll), so
  routes show the new perm; maxMessageSize also bounds the store's puts;
- autoCreateTopicEnable: TBW102 gains or loses PERM_INHERIT (and is re-registered), so
  auto-creation through it works or stops, not only on this broker's send check;
- longPollingEnable, shortPollingTimeMills, pullSuspendMaxTimeMillis, the
  maxTransfer*OnMessageInMemory keys, slaveReadEnable, accessMessageInMemoryMaxRatio,
  whichBrokerWhenConsumeSlowly: the next pull reads the rebuilt `PullConfig`;
- maxHeldPullsPerConnection, maxHeldPulls: the long-polling bounds of the next held pull;
- autoCreateSubscriptionGroup: the group table's auto-create switch;
- flushIntervalCommitLog, syncFlushTimeout: the store actor's flush period (from the next
  flush) and sync-flush wait;
- registerNameServerPeriod: the registration loop reads it at each period;
- brokerNotActiveTimeoutMillis, sendHeartbeatTimeoutMillis, registerBrokerTimeoutMills: read
  from the config object at each registration / heartbeat;
- rebalanceLockMaxLiveTime: the queue-lock manager's expiry, from the next lock check;
- the retention keys (`RETENTION_KEYS`: fileReservedTime, deleteWhen, the disk ratios that
  start or force a clean-up, and how a round deletes): the clean-up service reads them from
  the config object at each round (clean_service.py);
- rejectTransactionMessage: the send path's rebuilt `SendConfig`; transactionTimeOut,
  transactionCheckMax, transactionCheckInterval: the transaction service reads them at each
  END_TRANSACTION and check round (transaction_service.py; a new interval from the next sleep).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.pull.hold import HoldLimits
from rocketrio.actors.broker.pull.processor import PullConfig
from rocketrio.actors.broker.send.processor import SendConfig
from rocketrio.actors.kernel.live_update import ConfigChange, UpdatePolicy
from rocketrio.protocol.bodies import PERM_READ, PERM_WRITE, TopicConfigSerializeWrapper

if TYPE_CHECKING:
    from rocketrio.actors.broker.broker import Broker

_PULL_KEYS: Final = frozenset(
    {
        "longPollingEnable",
        "shortPollingTimeMills",
        "pullSuspendMaxTimeMillis",
        "maxTransferCountOnMessageInMemory",
        "maxTransferBytesOnMessageInMemory",
        "slaveReadEnable",
        "accessMessageInMemoryMaxRatio",
        "whichBrokerWhenConsumeSlowly",
    }
)
_SEND_KEYS: Final = frozenset(
    {"brokerPermission", "autoCreateTopicEnable", "maxMessageSize", "rejectTransactionMessage"}
)
# read from the config object by each END_TRANSACTION and each check round
TRANSACTION_KEYS: Final = frozenset(
    {"transactionTimeOut", "transactionCheckMax", "transactionCheckInterval"}
)
RETENTION_KEYS: Final = frozenset(
    {
        "fileReservedTime",
        "deleteWhen",
        "diskMaxUsedSpaceRatio",
        "diskSpaceCleanForciblyRatio",
        "cleanFileForciblyEnable",
        "destroyMapedFileIntervalForcibly",
        "deleteCommitLogFilesInterval",
        "deleteFileBatchMax",
    }
)

BROKER_POLICY: Final = UpdatePolicy(
    role="broker",
    live_keys=_PULL_KEYS
    | _SEND_KEYS
    | RETENTION_KEYS
    | TRANSACTION_KEYS
    | {
        "maxHeldPullsPerConnection",
        "maxHeldPulls",
        "autoCreateSubscriptionGroup",
        "flushIntervalCommitLog",
        "syncFlushTimeout",
        "registerNameServerPeriod",
        "brokerNotActiveTimeoutMillis",
        "sendHeartbeatTimeoutMillis",
        "registerBrokerTimeoutMills",
        "rebalanceLockMaxLiveTime",
    },
    # upstream AdminBrokerProcessor.initConfigBlackList adds these to configBlackList
    always_black=frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"}),
    restart_hint="change it in the broker's config file and restart the broker",
)


def registered_topics(
    wrapper: TopicConfigSerializeWrapper, broker_permission: int
) -> TopicConfigSerializeWrapper:
    """The topic table as registered with the NameServers: with brokerPermission lacking R or
    W, every topic's perm is masked by it (upstream registerBrokerAll), so routes show that
    this broker takes no writes (or reads)."""
    if broker_permission & PERM_READ and broker_permission & PERM_WRITE:
        return wrapper
    return attrs.evolve(
        wrapper,
        topicConfigTable={
            name: attrs.evolve(tc, perm=tc.perm & broker_permission)
            for name, tc in wrapper.topicConfigTable.items()
        },
    )


def apply_broker_changes(broker: Broker, changes: tuple[ConfigChange, ...]) -> None:
    """Tell the collaborators that copied a value at start (module docstring). The config
    object itself already holds the new values."""
    c: BrokerConfig = broker.config
    keys = {ch.key for ch in changes}
    if keys & _SEND_KEYS:
        broker.send.config = SendConfig.of(c)
    if keys & (_PULL_KEYS | {"brokerPermission"}):
        broker.pull.config = PullConfig.of(c)
    if keys & {"maxHeldPullsPerConnection", "maxHeldPulls"}:
        broker.pull_hold.limits = HoldLimits(c.maxHeldPullsPerConnection, c.maxHeldPulls)
    if "rebalanceLockMaxLiveTime" in keys:
        broker.locks.max_live_s = c.rebalanceLockMaxLiveTime / 1000
    if "autoCreateSubscriptionGroup" in keys:
        broker.groups.auto_create = c.autoCreateSubscriptionGroup
    if keys & {"flushIntervalCommitLog", "syncFlushTimeout", "maxMessageSize"}:
        broker.store_actor.set_limits(
            flush_interval_ms=c.flushIntervalCommitLog,
            sync_flush_timeout_ms=c.syncFlushTimeout,
            max_message_size=c.maxMessageSize,
        )
    if "autoCreateTopicEnable" in keys:
        broker.topics.set_auto_create_topic(c.autoCreateTopicEnable)
    if "brokerPermission" in keys:
        # a new DataVersion makes the NameServers take the masked topic perms (upstream
        # nextVersion(stateMachineVersion)); the change re-registers at once
        broker.topics.set_state_version(broker.topics.data_version.stateVersion)
