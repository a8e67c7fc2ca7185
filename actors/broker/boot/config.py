"""Broker configuration: upstream BrokerConfig + MessageStoreConfig keys and defaults.

One flat class, like upstream's broker.conf which mixes both. Key names are upstream's, so an
existing broker.conf reads unchanged (keys we do not implement are rejected, naming the key).
The remoting server keys (idle timeout, connection caps, byte bounds) are inherited from
`RemotingServerConfig`, as upstream reads its NettyServerConfig from the same file.
"""

from __future__ import annotations

import enum
import os

import attrs

from rocketrio.actors.auth.config import credentials_key, init_user_key, whitelist_key
from rocketrio.actors.broker.schedule.policy import parse_message_delay_level
from rocketrio.actors.broker.store.clean_policy import parse_delete_when
from rocketrio.actors.kernel.server_limits import RemotingServerConfig
from rocketrio.actors.observe.metrics_exporter import DEFAULT_PROM_EXPORTER_PORT
from rocketrio.actors.observe.metrics_exporter import MetricsExporterType as MetricsExporterType
from rocketrio.protocol.config import non_negative, positive


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class FlushDiskType(enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


def _broker_permission(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    """PermName bits a broker may have: 4 read, 2 write (6 both), 1 inherit."""
    if value < 0 or value & ~7:
        raise ValueError(f"{attribute.name} must be a perm (2 write, 4 read, 6 both), got {value}")


def _positive_hours(_inst: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be a positive number of hours, got {value}")


def _delete_when(_inst: object, _attribute: attrs.Attribute[str], value: str) -> None:
    parse_delete_when(value)


def _delay_levels(_inst: object, _attribute: attrs.Attribute[str], value: str) -> None:
    parse_message_delay_level(value)


@attrs.define
class BrokerConfig(RemotingServerConfig):
    # identity
    brokerClusterName: str = "DefaultCluster"
    brokerName: str = "broker-a"
    brokerId: int = attrs.field(default=0, validator=non_negative)
    brokerIP1: str = "127.0.0.1"
    listenPort: int = attrs.field(default=10911, validator=positive)
    namesrvAddr: str = ""
    rocketmqHome: str = "."
    storePathRootDir: str = attrs.field(factory=lambda: os.path.join(".", "store"))
    logDir: str = "logs"
    # the file the broker was started with (`rocketrio broker -c`, as upstream's BrokerStartup
    # sets it): UPDATE_BROKER_CONFIG writes live changes there; empty: not persisted
    brokerConfigPath: str = ""
    # keys UPDATE_BROKER_CONFIG refuses (';'-separated); brokerConfigPath, rocketmqHome and
    # configBlackList are refused whatever it says (upstream AdminBrokerProcessor)
    configBlackList: str = "configBlackList;brokerConfigPath"
    brokerRole: BrokerRole = BrokerRole.ASYNC_MASTER
    # Prometheus: GET /metrics on metricsPromExporterHost (empty: brokerIP1) and its port
    metricsExporterType: MetricsExporterType = MetricsExporterType.DISABLE
    metricsPromExporterHost: str = ""
    metricsPromExporterPort: int = attrs.field(
        default=DEFAULT_PROM_EXPORTER_PORT, validator=positive
    )
    # topics
    autoCreateTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    defaultTopicQueueNums: int = attrs.field(default=8, validator=positive)
    brokerPermission: int = attrs.field(default=6, validator=_broker_permission)
    # name server registration / heartbeat
    registerNameServerPeriod: int = attrs.field(default=30_000, validator=positive)
    brokerHeartbeatInterval: int = attrs.field(default=1000, validator=positive)
    brokerNotActiveTimeoutMillis: int = attrs.field(default=10_000, validator=positive)
    sendHeartbeatTimeoutMillis: int = attrs.field(default=1000, validator=positive)
    registerBrokerTimeoutMills: int = attrs.field(default=24_000, validator=positive)
    # slave acting master (RIP-32, failover/): the member-group poll period, escape of
    # secondary messages to another group's master, pre-online, the DataVersion step of
    # consumerOffset.json, strict queue locks and the heartbeat of old NameServers (upstream
    # keys and defaults; totalReplicas is upstream's MessageStoreConfig key)
    enableSlaveActingMaster: bool = False
    syncBrokerMemberGroupPeriod: int = attrs.field(default=1000, validator=positive)
    enableRemoteEscape: bool = False
    skipPreOnline: bool = False
    consumerOffsetUpdateVersionStep: int = attrs.field(default=500, validator=positive)
    lockInStrictMode: bool = False
    compatibleWithOldNameSrv: bool = True
    totalReplicas: int = attrs.field(default=1, validator=positive)
    # pull / long polling
    longPollingEnable: bool = True
    litePullMessageEnable: bool = True  # LITE_PULL_MESSAGE (361) served
    storeReplyMessageEnable: bool = True  # request-reply: a reply is stored besides pushed
    shortPollingTimeMills: int = attrs.field(default=1000, validator=positive)
    # bounds on long polling (rocketrio's; upstream holds any number for as long as asked)
    pullSuspendMaxTimeMillis: int = attrs.field(default=60_000, validator=positive)
    maxHeldPullsPerConnection: int = attrs.field(default=4096, validator=positive)
    maxHeldPulls: int = attrs.field(default=65536, validator=positive)
    maxPullMsgNums: int = attrs.field(default=32 * 1024, validator=positive)
    # SQL92 property filtering (upstream keys and defaults; filter/, docs/sql92-filter.md):
    # enablePropertyFilter and filterSupportRetry are live; the bit-map (enableCalcFilterBitMap
    # with enableConsumeQueueExt, dispatch/filter_data.py, storage/cq_ext.py) is read at start;
    # bitMapLengthConsumeQueueExt is set from the bloom filter's size, as upstream
    enablePropertyFilter: bool = False
    filterSupportRetry: bool = False
    enableCalcFilterBitMap: bool = False
    enableConsumeQueueExt: bool = False
    bitMapLengthConsumeQueueExt: int = attrs.field(default=112, validator=positive)
    expectConsumerNumUseFilter: int = attrs.field(default=32, validator=positive)
    maxErrorRateOfBloomFilter: int = attrs.field(default=20, validator=positive)
    filterDataCleanTimeSpan: int = attrs.field(default=24 * 3600 * 1000, validator=positive)
    # per pull response (MessageStoreConfig; upstream's "in memory" limits)
    maxTransferCountOnMessageInMemory: int = attrs.field(default=32, validator=positive)
    maxTransferBytesOnMessageInMemory: int = attrs.field(default=256 * 1024, validator=positive)
    # rocketrio's own: a pull that may read more bytes than this reads in a worker thread
    pullReadOffLoopBytes: int = attrs.field(default=256 * 1024, validator=positive)
    # how long a queue lock of an orderly consumer lives on the broker without renewal
    # (upstream's system property rocketmq.broker.rebalance.lockMaxLiveTime)
    rebalanceLockMaxLiveTime: int = attrs.field(default=60_000, validator=positive)
    # the broker's queue assignment (QUERY_ASSIGNMENT, actors/broker/assign/): the mode of a
    # (topic, group) never set by SET_MESSAGE_REQUEST_MODE, its POP share, and whether the
    # broker splits the queues at all (off: every consumer gets every queue)
    defaultMessageRequestMode: str = attrs.field(
        default="PULL", validator=attrs.validators.in_(("PULL", "POP"))
    )
    defaultPopShareQueueNum: int = -1
    serverLoadBalancerEnable: bool = True
    # consumer offsets / retries
    flushConsumerOffsetInterval: int = attrs.field(default=5000, validator=positive)
    maxReconsumeTimes: int = attrs.field(default=16, validator=non_negative)
    # store (MessageStoreConfig keys)
    flushDiskType: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    syncFlushTimeout: int = attrs.field(default=5000, validator=positive)
    flushIntervalCommitLog: int = attrs.field(default=500, validator=positive)
    mappedFileSizeCommitLog: int = attrs.field(default=1024 * 1024 * 1024, validator=positive)
    mappedFileSizeConsumeQueue: int = attrs.field(default=300_000 * 20, validator=positive)
    maxMessageSize: int = attrs.field(default=4 * 1024 * 1024, validator=positive)
    # retention (clean_policy.py / clean_service.py; upstream MessageStoreConfig keys): hours a
    # closed CommitLog segment is kept (fractions allowed), the hours of day a round may delete
    # expired segments, and the disk ratios that start a round (75) or force one (85)
    fileReservedTime: float = attrs.field(default=72.0, validator=_positive_hours)
    deleteWhen: str = attrs.field(default="04", validator=_delete_when)
    diskMaxUsedSpaceRatio: int = attrs.field(default=75, validator=positive)
    diskSpaceCleanForciblyRatio: int = attrs.field(default=85, validator=positive)
    cleanFileForciblyEnable: bool = True
    # how long a deletion waits for in-flight reads before it gives up the round, the pause
    # between two deleted segments, and the most segments one round deletes
    destroyMapedFileIntervalForcibly: int = attrs.field(default=120_000, validator=positive)
    deleteCommitLogFilesInterval: int = attrs.field(default=100, validator=non_negative)
    deleteFileBatchMax: int = attrs.field(default=10, validator=positive)
    # disk-space protection (disk_guard.py): refuse sends above this percent of the CommitLog's
    # disk (upstream clamps it to 35..90), checked every cleanResourceInterval ms
    diskSpaceWarningLevelRatio: int = attrs.field(default=90, validator=positive)
    cleanResourceInterval: int = attrs.field(default=10_000, validator=positive)
    # the background scrub (store/scrub_service.py): CommitLog bytes below the checkpoint
    # verified per second; 0 turns it off (rocketrio's key)
    scrubBytesPerSecond: int = attrs.field(default=8 * 1024 * 1024, validator=non_negative)
    # ... and starts a new pass over it at most once per this many seconds (0: back to back)
    scrubLapIntervalSeconds: int = attrs.field(default=3600, validator=non_negative)
    messageIndexEnable: bool = True
    # key index files: hash slots and entries per file (MessageStoreConfig keys and defaults)
    maxHashSlotNum: int = attrs.field(default=5_000_000, validator=positive)
    maxIndexNum: int = attrs.field(default=5_000_000 * 4, validator=positive)
    # check record CRCs when recovery scans the CommitLog (upstream key and default)
    checkCRCOnRecover: bool = True
    # rocketrio: check the CRC of every record a pull serves that this broker process did not
    # write or check itself; a damaged record is refused (SYSTEM_ERROR), never delivered
    checkCRCOnPull: bool = True
    messageDelayLevel: str = attrs.field(
        default="1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
        validator=_delay_levels,
    )
    # delay and timer messages (schedule_service.py): delayOffset.json's write period and
    # DataVersion step, and the longest timer delay a send may ask for (upstream keys/defaults)
    flushDelayOffsetInterval: int = attrs.field(default=10_000, validator=positive)
    delayOffsetUpdateVersionStep: int = attrs.field(default=200, validator=positive)
    timerMaxDelaySec: int = attrs.field(default=3 * 24 * 3600, validator=positive)
    # static topics (static_topic_clean.py): how often a master cleans old generations from
    # topicQueueMapping.json, in ms (upstream has no key: 5 minutes, in the deleteWhen hours)
    topicQueueMappingCleanInterval: int = attrs.field(default=300_000, validator=positive)
    # controller mode (issue 3)
    enableControllerMode: bool = False
    controllerAddr: str = ""
    fetchControllerAddrByDnsLookup: bool = False
    controllerHeartBeatTimeoutMills: int = attrs.field(default=10_000, validator=positive)
    syncBrokerMetadataPeriod: int = attrs.field(default=5000, validator=positive)
    checkSyncStateSetPeriod: int = attrs.field(default=5000, validator=positive)
    syncControllerMetadataPeriod: int = attrs.field(default=10_000, validator=positive)
    brokerElectionPriority: int = 2**31 - 1
    # empty = storePathRootDir (broker.meta / .broker.meta.temp live there)
    storePathBrokerIdentity: str = ""
    # empty = <storePathRootDir>/epochFileCheckpoint (plus a .bak copy)
    storePathEpochFile: str = ""
    # HA (issue 4); listed so configs of the deployment guide load
    # replication (AutoSwitch HA and classic master/slave)
    # 0: listenPort + 1, as upstream's BrokerStartup sets it
    haListenPort: int = attrs.field(default=0, validator=non_negative)
    haSendHeartbeatInterval: int = attrs.field(default=5000, validator=positive)
    haHousekeepingInterval: int = attrs.field(default=20_000, validator=positive)
    haTransferBatchSize: int = attrs.field(default=32 * 1024, validator=positive)
    haMaxTimeSlaveNotCatchup: int = attrs.field(default=15_000, validator=positive)
    # upstream defaults to false, where a controller-mode master acknowledges before any replica
    # holds the message and a failover loses it; rocketrio's promise needs every in-sync copy
    allAckInSyncStateSet: bool = True
    inSyncReplicas: int = attrs.field(default=1, validator=positive)
    minInSyncReplicas: int = attrs.field(default=1, validator=positive)
    asyncLearner: bool = False
    syncFromLastFile: bool = False
    # rocketrio: with allAckInSyncStateSet=false, how long a master may count fewer copies than
    # its whole SyncStateSet after the controller last confirmed it (and how long a new master
    # waits before it does); see actors/broker/roles/role_core.py
    masterLeaseTimeMillis: int = attrs.field(default=3000, validator=positive)
    # reads from slaves (classic mode; and a master that suggests a slave to slow consumers)
    slaveReadEnable: bool = False
    accessMessageInMemoryMaxRatio: int = attrs.field(default=40, validator=positive)
    whichBrokerWhenConsumeSlowly: int = attrs.field(default=1, validator=non_negative)
    # ACL 2.0 (upstream AuthConfig keys; see actors/auth/config.py)
    authenticationEnabled: bool = False
    authorizationEnabled: bool = False
    initAuthenticationUser: str = attrs.field(default="", validator=init_user_key)
    innerClientAuthenticationCredentials: str = attrs.field(default="", validator=credentials_key)
    authenticationWhitelist: str = attrs.field(default="", validator=whitelist_key)
    authorizationWhitelist: str = attrs.field(default="", validator=whitelist_key)
    # POP consumption (upstream BrokerConfig keys and defaults; see actors/broker/pop_*.py)
    reviveQueueNum: int = attrs.field(default=8, validator=positive)
    reviveInterval: int = attrs.field(default=1000, validator=positive)  # ms between scans
    popFromRetryProbability: int = attrs.field(default=20, validator=non_negative)
    enableRetryTopicV2: bool = False
    retrieveMessageFromPopRetryTopicV1: bool = True
    maxPopPollingSize: int = attrs.field(default=100_000, validator=positive)
    # the POP buffer (upstream PopBufferMergeService; actors/broker/pop/buffer_merge.py): CKs
    # kept in memory while acknowledged, written after popCkStayBufferTime ms or within
    # popCkStayBufferTimeOut ms of their revive time; off by default, as upstream
    enablePopBufferMerge: bool = False
    popCkStayBufferTime: int = attrs.field(default=10_000, validator=positive)
    popCkStayBufferTimeOut: int = attrs.field(default=3_000, validator=positive)
    popCkMaxBufferSize: int = attrs.field(default=200_000, validator=positive)
    popCkOffsetMaxQueueSize: int = attrs.field(default=20_000, validator=positive)
    # transactional messages (upstream BrokerConfig keys and defaults; transaction_policy.py):
    # a half message without an op gets its first check after transactionTimeOut ms (or its
    # CHECK_IMMUNITY_TIME_IN_SECONDS, whichever is longer), a check round runs every
    # transactionCheckInterval ms on the master, and a half checked transactionCheckMax times
    # is discarded to TRANS_CHECK_MAX_TIME_TOPIC; rejectTransactionMessage refuses half sends
    transactionTimeOut: int = attrs.field(default=6_000, validator=positive)
    transactionCheckMax: int = attrs.field(default=15, validator=positive)
    transactionCheckInterval: int = attrs.field(default=30_000, validator=positive)
    rejectTransactionMessage: bool = False
    # local mode (`rocketrio broker --enable-proxy`): the gRPC proxy for the RocketMQ 5 SDKs
    # runs in this process on grpcServerPort (upstream's proxy key and default) and reaches this
    # broker in-process (actors/proxy/local.py)
    enableProxy: bool = False
    grpcServerPort: int = attrs.field(default=8081, validator=non_negative)

    @property
    def ha_listen_port(self) -> int:
        return self.haListenPort or self.listenPort + 1

    @property
    def ha_addr(self) -> str:
        return f"{self.brokerIP1}:{self.ha_listen_port}"

    @property
    def broker_addr(self) -> str:
        return f"{self.brokerIP1}:{self.listenPort}"

    @property
    def broker_identity_dir(self) -> str:
        return self.storePathBrokerIdentity or self.storePathRootDir

    @property
    def epoch_file_path(self) -> str:
        return self.storePathEpochFile or os.path.join(self.storePathRootDir, "epochFileCheckpoint")

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrvAddr.split(";") if a.strip()]
