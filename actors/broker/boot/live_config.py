"""UPDATE_BROKER_CONFIG (25): which broker keys change live, and how the running broker hears.

`BROKER_POLICY.live_keys` is the claim "the running broker uses the new value at once"; every
other key of `BrokerConfig` is refused as needing a restart (actors/kernel/live_update.py), because
something reads it only at start: the identity and addresses (brokerName, brokerId, listenPort,
haListenPort, brokerIP1, namesrvAddr ...), the store layout and its recovery (storePathRootDir,
mappedFileSize*, checkCRC*, messageDelayLevel ...), the role and the replication services
(brokerRole, enableControllerMode, the ha*, controller* and SyncStateSet keys), the ACL gate
(built at start), the remoting server limits, and the periods of loops started at boot
(brokerHeartbeatInterval also paces the controller heartbeats, flushConsumerOffsetInterval).

How each live key reaches the running broker: `LiveConfig.apply` hands the changed keys to
every collaborator's own ``reconfigure(config, changed)``, which takes the keys it reads:

- brokerPermission, autoCreateTopicEnable, maxMessageSize: the send path's `SendConfig` and the
  pull path's `PullConfig` are rebuilt (send/processor.py SEND_KEYS, pull/processor.py
  PULL_KEYS) (brokerPermission without W refuses sends, without R pulls); brokerPermission also
  bumps the topic DataVersion and re-registers at once with the NameServers, each topic's perm
  masked by brokerPermission (upstream registerBrokerAll), so routes show the new perm;
  maxMessageSize also bounds the store's puts;
- autoCreateTopicEnable: TBW102 gains or loses PERM_INHERIT (and is re-registered), so
  auto-creation through it works or stops, not only on this broker's send check;
- longPollingEnable, shortPollingTimeMills, pullSuspendMaxTimeMillis, the
  maxTransfer*OnMessageInMemory keys, slaveReadEnable, accessMessageInMemoryMaxRatio,
  whichBrokerWhenConsumeSlowly: the next pull reads the rebuilt `PullConfig`;
- maxHeldPullsPerConnection, maxHeldPulls: the long-polling bounds of the next held pull;
- autoCreateSubscriptionGroup: the group table's auto-create switch;
- litePullMessageEnable: the next LITE_PULL_MESSAGE (pull/feature.py); storeReplyMessageEnable:
  the next reply (reply/processor.py);
- flushIntervalCommitLog, syncFlushTimeout: the store actor's flush period (from the next
  flush) and sync-flush wait;
- scrubBytesPerSecond, scrubLapIntervalSeconds: the background scrub reads them before each
  chunk (scrub_service.py);
- registerNameServerPeriod: the registration loop registers at once, then reads it at each
  period (boot/registration.py `reconfigure`);
- brokerNotActiveTimeoutMillis, sendHeartbeatTimeoutMillis, registerBrokerTimeoutMills: read
  from the config object at each registration / heartbeat;
- rebalanceLockMaxLiveTime: the queue-lock manager's expiry, from the next lock check;
- the retention keys (`RETENTION_KEYS`: fileReservedTime, deleteWhen, the disk ratios that
  start or force a clean-up, and how a round deletes): the clean-up service reads them from
  the config object at each round (clean_service.py);
- enablePropertyFilter, filterSupportRetry: the next pull's and CHECK_CLIENT_CONFIG's rebuilt
  `FilterConfig` (dispatch/message_filter.py FILTER_KEYS);
- rejectTransactionMessage: the send path's rebuilt `SendConfig`; transactionTimeOut,
  transactionCheckMax, transactionCheckInterval: the transaction service reads them at each
  END_TRANSACTION and check round (transaction/service.py); a new interval re-aims the check
  sleep in progress (its `check_timer`, kernel/live_interval.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Protocol

import attrs

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.message_filter import FILTER_KEYS
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.pull.hold import HOLD_KEYS
from rocketrio.actors.broker.pull.processor import PULL_KEYS
from rocketrio.actors.broker.send.processor import SEND_KEYS
from rocketrio.actors.kernel.live_update import ConfigChange, UpdatePolicy
from rocketrio.actors.kernel.live_update_service import ConfigUpdater
from rocketrio.protocol.bodies import PERM_READ, PERM_WRITE, TopicConfigSerializeWrapper
from rocketrio.protocol.codes import RequestCode

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
    live_keys=PULL_KEYS
    | SEND_KEYS
    | HOLD_KEYS
    | RETENTION_KEYS
    | TRANSACTION_KEYS
    | FILTER_KEYS
    | {
        "autoCreateSubscriptionGroup",
        "flushIntervalCommitLog",
        "syncFlushTimeout",
        "scrubBytesPerSecond",
        "scrubLapIntervalSeconds",
        "registerNameServerPeriod",
        "brokerNotActiveTimeoutMillis",
        "sendHeartbeatTimeoutMillis",
        "registerBrokerTimeoutMills",
        "rebalanceLockMaxLiveTime",
        "litePullMessageEnable",
        "storeReplyMessageEnable",
    },
    # upstream AdminBrokerProcessor.initConfigBlackList adds these to configBlackList
    always_black=frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"}),
    restart_hint="change it in the broker's config file and restart the broker",
)


class Reconfigurable(Protocol):
    """A collaborator that copied config values at start and takes live changes itself."""

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None: ...


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


class LiveConfig:
    """UPDATE_BROKER_CONFIG (25): validated and written by the kernel's `ConfigUpdater`, then
    handed to every collaborator (the config object itself already holds the new values)."""

    def __init__(self, io: BrokerIO, parts: Sequence[Reconfigurable]) -> None:
        config = self.config = io.config
        self.parts = tuple(parts)
        self.updater = ConfigUpdater(
            config,
            BROKER_POLICY,
            config_path=lambda: config.brokerConfigPath or None,
            apply=self.apply,
            io_runner=io.run_blocking,
            fs=io.fs,
            log=io.log.bind(actor="config"),
        )

    def apply(self, changes: tuple[ConfigChange, ...]) -> None:
        changed = frozenset(ch.key for ch in changes)
        for part in self.parts:
            part.reconfigure(self.config, changed)

    def handlers(self) -> Handlers:
        return {RequestCode.UPDATE_BROKER_CONFIG: self.updater.handle}


LiveChange = Callable[[BrokerConfig, frozenset[str]], None]
