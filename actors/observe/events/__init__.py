"""The log-event catalogue: the one declaration of every event a rocketrio process logs.

Each event is a frozen attrs record registered under its snake_case name with `@event`; its
typed fields are the fields of the JSON line (actors/observe/logs.py adds the common schema:
ts, level, node, role, actor, event). Cores build records, shells `emit` them. The Spark job
builds its read schema from this package (`field_types`), so the writer and the reader cannot
drift apart, and tests fail when code logs a name that is not here.

This module is the facade every caller uses (``from rocketrio.actors.observe import events``,
then ``events.emit(log, events.ElectMaster(...))``): it re-exports the machinery of
`catalogue` and every record. The records are declared by the role that logs them:

- `incidents`: the records the Spark incident job reads (elections, role changes,
  SyncStateSet changes, truncations, heartbeat timeouts, Raft roles, message traces);
- `kernel`: actor runtime, remoting connections, live config, /metrics, process lifecycle;
- `up`, `console`, `chaos`: the `rocketrio up` supervisor, the web console and the faults
  `rocketrio chaos` injects;
- `container`: the broker container (several brokers in one process);
- `namesrv`, `controller`, `raft`, `auth`, `proxy`: those servers;
- `roles`, `failover`, `ha`, `store`, `broker`: the broker's role service (BrokerId, controller
  link, slave acting master),
  HA replication, message store, and the rest of the broker (tables, registration, pull,
  POP, transactions, schedule, static topics);
- `client`: producers and consumers.

Importing this package imports every role module, so `CATALOGUE` is complete before anyone
reads it.
"""

# ruff: noqa: F401  (a facade: every import below is a re-export)

from __future__ import annotations

from rocketrio.actors.observe.events.auth import (
    AuthAclDeleted,
    AuthAclUpdated,
    AuthNoUsers,
    AuthRefused,
    AuthSynced,
    AuthUserCreated,
    AuthUserDeleted,
    AuthUserInitialized,
    AuthUserUpdated,
)
from rocketrio.actors.observe.events.broker import (
    AssignmentNone,
    BrokerHeartbeatFailed,
    ConfigLoadedFromBackup,
    ConfigPersistFailed,
    ConsumerGroupChanged,
    FilterDataCleaned,
    GroupOffsetCloned,
    HeldPullFailed,
    MessageRequestModeSet,
    MessageToDlq,
    MetaJournalFailed,
    MetaJournalReplayed,
    OffsetReset,
    PopOrderAckIllegal,
    PopRevived,
    PopReviveRecordSkipped,
    PullHoldRefused,
    RegisterBrokerFailed,
    RegisteredToNamesrv,
    ReplyPushFailed,
    ScheduleDeliverFailed,
    ScheduleEntryMissing,
    ScheduleServiceStarted,
    ScheduleServiceStopped,
    ShutdownStepFailed,
    ShutdownStepTimeout,
    Sql92SubscriptionRefused,
    StaticTopicConfigRepaired,
    StaticTopicLeadershipReleased,
    StaticTopicMappingCleaned,
    StaticTopicMappingRefused,
    StaticTopicMappingSynced,
    StaticTopicMappingUpdated,
    StaticTopicMessageForwarded,
    StaticTopicRemoteReadFailed,
    TopicAdoptedFromQueues,
    TopicDeleted,
    TopicUpdated,
    TransactionCheckDiscarded,
    TransactionCheckNoProducer,
    TransactionEndRefused,
    UnregisterBrokerFailed,
    UnusedTopicQueuesDeleted,
)
from rocketrio.actors.observe.events.catalogue import (
    CATALOGUE,
    COMMON_FIELDS,
    CONTEXT_FIELDS,
    LEVELS,
    Json,
    LogEvent,
    emit,
    event,
    field_types,
    record_fields,
    strip_optional,
)
from rocketrio.actors.observe.events.chaos import (
    ChaosFaultHealed,
    ChaosFaultInjected,
    ChaosFaultSkipped,
    ChaosFinished,
    ChaosStarted,
)
from rocketrio.actors.observe.events.client import (
    BroadcastConsumeDropped,
    BrokerConnectionClosed,
    ConsumeBadStatus,
    ConsumedDirectly,
    ConsumeFailed,
    ConsumerIdsChanged,
    GetConsumerIdsFailed,
    HeartbeatFailed,
    OffsetResetApplied,
    OrderlyLockFailed,
    OrderlyLockLost,
    OrderlyQueueUnlocked,
    PersistOffsetFailed,
    PopMoved,
    PullFailed,
    PullMoved,
    PullOffsetIllegal,
    QueryConsumerOffsetFailed,
    Rebalance,
    RebalanceFailed,
    RebalanceNoRoute,
    ReplyPushBad,
    ReplyUnmatched,
    ResetOffsetBadRequest,
    ResetOffsetNoConsumer,
    RouteUpdateFailed,
    SendBackFailed,
    SendCallbackFailed,
    SendFailed,
    StartOffsetFailed,
    TransactionCheckDropped,
    TransactionEndFailed,
    TransactionListenerFailed,
    UnregisterClientFailed,
)
from rocketrio.actors.observe.events.console import (
    ConsoleAction,
    ConsoleFailed,
    ConsoleListening,
    ConsolePollFailed,
    ConsoleViewerRefused,
)
from rocketrio.actors.observe.events.container import (
    ContainerBrokerAdded,
    ContainerBrokerFailed,
    ContainerBrokerRemoved,
    ContainerRequestRefused,
    ContainerStarted,
)
from rocketrio.actors.observe.events.controller import (
    ControllerBoot,
    ElectMasterFailed,
    MasterDeathConfirmed,
    MasterDeathNotConfirmed,
    NotifyBrokerRoleChangedFailed,
)
from rocketrio.actors.observe.events.failover import (
    ActingMasterChanged,
    EscapePutFailed,
    GroupMinBrokerIdMoved,
    PopRecordEscapeFailed,
    PreOnlineDone,
    PreOnlineSynced,
    SlavePreOnlineDone,
    StrictLockPartial,
)
from rocketrio.actors.observe.events.ha import (
    ConfirmOffsetMoved,
    EpochRecorded,
    HaConnected,
    HaHandshake,
    MasterHaAddrUnknown,
    SyncStateSetAccepted,
    SyncStateSetProposed,
    SyncStateSetRefused,
)
from rocketrio.actors.observe.events.incidents import (
    BrokerBoot,
    BrokerExpired,
    BrokerHeartbeatTimeout,
    BrokerRoleChanged,
    CommitlogTruncated,
    ElectMaster,
    HaConnectionClosed,
    HaLogReset,
    HaTruncated,
    MasterFirstWrite,
    RaftHeartbeatTimeout,
    RaftLeaderElected,
    RaftLogTruncated,
    RaftRoleChanged,
    RaftSnapshotInstalled,
    RaftTermIncreased,
    RaftVoteResult,
    SyncStateSetChanged,
    TraceConsumed,
    TraceSendAcked,
    TraceSendFailed,
)
from rocketrio.actors.observe.events.kernel import (
    ActorCrashed,
    BadFrame,
    ConfigUpdated,
    ConfigUpdateRefused,
    ConnectionIdleClosed,
    ConnectionReadTimeout,
    ConnectionRefused,
    MetricsCollectFailed,
    MetricsListening,
    MetricsRequestFailed,
    ProcessFailed,
    ProcessShutdown,
    RequestFailed,
    RequestRefusedBusy,
    StartupFailed,
)
from rocketrio.actors.observe.events.namesrv import (
    BrokerRegistered,
    BrokerRegistrationIgnored,
    BrokerUnregistered,
    KvConfigPersistFailed,
    MinBrokerIdChanged,
    NamesrvBoot,
    NotifyMinBrokerIdChangeFailed,
    WritePermAdded,
    WritePermWiped,
)
from rocketrio.actors.observe.events.proxy import (
    ProxyCallFailed,
    ProxyEndpointLookupFailed,
    ProxyGroupConfigFailed,
    ProxyLocalStarted,
    ProxyRenewed,
    ProxyRenewFailed,
    ProxyStarted,
    ProxyTransactionCheck,
)
from rocketrio.actors.observe.events.raft import (
    RaftLeaderReady,
    RaftLogRecovered,
    RaftMessageMalformed,
    RaftNodeStarted,
    RaftPeerReachable,
    RaftPeerUnreachable,
    RaftSnapshotTaken,
)
from rocketrio.actors.observe.events.roles import (
    BrokerIdApplied,
    BrokerIdLoaded,
    BrokerIdReapplied,
    BrokerIdRefused,
    BrokerIdResumeFromTemp,
    BrokerIdTempWritten,
    BrokerRoleChangeNotified,
    CatchUpFenceHolds,
    CatchUpFenceLifted,
    ClassicMasterFound,
    ClassicMasterStarted,
    ControllerCallFailed,
    ControllerCallRecovered,
    ControllerLeaderChanged,
    ControllerLeaderFound,
    ControllerStepRetry,
    MasterAddressChanged,
    MasterElectionRequested,
    MasterSteppedDown,
    SlaveSynced,
    SlaveSyncFailed,
    SyncStateSetAdopted,
)
from rocketrio.actors.observe.events.store import (
    CheckpointCorrupt,
    CommitLogDeleted,
    CommitlogQuarantined,
    CommitlogRecordCorrupt,
    CommitlogRecovered,
    ConsumeQueueRebuilt,
    DeleteFilesManually,
    DiskFull,
    DiskSpaceRecovered,
    EpochFileLoadedFromBackup,
    FlushSlow,
    PutFailed,
    RetentionHeld,
    SendAcked,
    SendNotAcked,
    StoreCorrupt,
    StoreFencedUntilRestart,
    StoreRecoveryProgress,
    StoreScrubDamage,
    TruncatingBelowConfirmOffset,
)
from rocketrio.actors.observe.events.up import (
    ChildExited,
    ChildStarted,
    ChildStopEscalated,
    UpStarted,
    UpStopped,
    UpStopping,
)

#: every catalogued event name
ALL = frozenset(CATALOGUE)
