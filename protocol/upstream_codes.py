"""Every request code Apache RocketMQ 5.2.0 defines (upstream `RequestCode`), as data.

Read from apache/rocketmq at tag ``rocketmq-all-5.2.0`` (commit
281a7b32f002019525cfa4dd4a4b983b653f070d), file
``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/RequestCode.java``: 147 codes, in
upstream's order. `docs/request-codes.md` says, for each, which rocketrio role serves it or why it
is refused; ``tests/unit/protocol/test_request_code_census.py`` holds the table, these names and
the roles' request tables to one another. Names only: the numbers are facts, the Python is ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

UPSTREAM_TAG: Final = "rocketmq-all-5.2.0"

_CODES: Final = (
    (10, "SEND_MESSAGE"),
    (11, "PULL_MESSAGE"),
    (12, "QUERY_MESSAGE"),
    (13, "QUERY_BROKER_OFFSET"),
    (14, "QUERY_CONSUMER_OFFSET"),
    (15, "UPDATE_CONSUMER_OFFSET"),
    (17, "UPDATE_AND_CREATE_TOPIC"),
    (21, "GET_ALL_TOPIC_CONFIG"),
    (22, "GET_TOPIC_CONFIG_LIST"),
    (23, "GET_TOPIC_NAME_LIST"),
    (25, "UPDATE_BROKER_CONFIG"),
    (26, "GET_BROKER_CONFIG"),
    (27, "TRIGGER_DELETE_FILES"),
    (28, "GET_BROKER_RUNTIME_INFO"),
    (29, "SEARCH_OFFSET_BY_TIMESTAMP"),
    (30, "GET_MAX_OFFSET"),
    (31, "GET_MIN_OFFSET"),
    (32, "GET_EARLIEST_MSG_STORETIME"),
    (33, "VIEW_MESSAGE_BY_ID"),
    (34, "HEART_BEAT"),
    (35, "UNREGISTER_CLIENT"),
    (36, "CONSUMER_SEND_MSG_BACK"),
    (37, "END_TRANSACTION"),
    (38, "GET_CONSUMER_LIST_BY_GROUP"),
    (39, "CHECK_TRANSACTION_STATE"),
    (40, "NOTIFY_CONSUMER_IDS_CHANGED"),
    (41, "LOCK_BATCH_MQ"),
    (42, "UNLOCK_BATCH_MQ"),
    (43, "GET_ALL_CONSUMER_OFFSET"),
    (45, "GET_ALL_DELAY_OFFSET"),
    (46, "CHECK_CLIENT_CONFIG"),
    (47, "GET_CLIENT_CONFIG"),
    (50, "UPDATE_AND_CREATE_ACL_CONFIG"),
    (51, "DELETE_ACL_CONFIG"),
    (52, "GET_BROKER_CLUSTER_ACL_INFO"),
    (53, "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG"),
    (54, "GET_BROKER_CLUSTER_ACL_CONFIG"),
    (60, "GET_TIMER_CHECK_POINT"),
    (61, "GET_TIMER_METRICS"),
    (200050, "POP_MESSAGE"),
    (200051, "ACK_MESSAGE"),
    (200151, "BATCH_ACK_MESSAGE"),
    (200052, "PEEK_MESSAGE"),
    (200053, "CHANGE_MESSAGE_INVISIBLETIME"),
    (200054, "NOTIFICATION"),
    (200055, "POLLING_INFO"),
    (100, "PUT_KV_CONFIG"),
    (101, "GET_KV_CONFIG"),
    (102, "DELETE_KV_CONFIG"),
    (103, "REGISTER_BROKER"),
    (104, "UNREGISTER_BROKER"),
    (105, "GET_ROUTEINFO_BY_TOPIC"),
    (106, "GET_BROKER_CLUSTER_INFO"),
    (200, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP"),
    (201, "GET_ALL_SUBSCRIPTIONGROUP_CONFIG"),
    (202, "GET_TOPIC_STATS_INFO"),
    (203, "GET_CONSUMER_CONNECTION_LIST"),
    (204, "GET_PRODUCER_CONNECTION_LIST"),
    (205, "WIPE_WRITE_PERM_OF_BROKER"),
    (206, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER"),
    (207, "DELETE_SUBSCRIPTIONGROUP"),
    (208, "GET_CONSUME_STATS"),
    (209, "SUSPEND_CONSUMER"),
    (210, "RESUME_CONSUMER"),
    (211, "RESET_CONSUMER_OFFSET_IN_CONSUMER"),
    (212, "RESET_CONSUMER_OFFSET_IN_BROKER"),
    (213, "ADJUST_CONSUMER_THREAD_POOL"),
    (214, "WHO_CONSUME_THE_MESSAGE"),
    (215, "DELETE_TOPIC_IN_BROKER"),
    (216, "DELETE_TOPIC_IN_NAMESRV"),
    (217, "REGISTER_TOPIC_IN_NAMESRV"),
    (219, "GET_KVLIST_BY_NAMESPACE"),
    (220, "RESET_CONSUMER_CLIENT_OFFSET"),
    (221, "GET_CONSUMER_STATUS_FROM_CLIENT"),
    (222, "INVOKE_BROKER_TO_RESET_OFFSET"),
    (223, "INVOKE_BROKER_TO_GET_CONSUMER_STATUS"),
    (300, "QUERY_TOPIC_CONSUME_BY_WHO"),
    (224, "GET_TOPICS_BY_CLUSTER"),
    (343, "QUERY_TOPICS_BY_CONSUMER"),
    (345, "QUERY_SUBSCRIPTION_BY_CONSUMER"),
    (301, "REGISTER_FILTER_SERVER"),
    (302, "REGISTER_MESSAGE_FILTER_CLASS"),
    (303, "QUERY_CONSUME_TIME_SPAN"),
    (304, "GET_SYSTEM_TOPIC_LIST_FROM_NS"),
    (305, "GET_SYSTEM_TOPIC_LIST_FROM_BROKER"),
    (306, "CLEAN_EXPIRED_CONSUMEQUEUE"),
    (307, "GET_CONSUMER_RUNNING_INFO"),
    (308, "QUERY_CORRECTION_OFFSET"),
    (309, "CONSUME_MESSAGE_DIRECTLY"),
    (310, "SEND_MESSAGE_V2"),
    (311, "GET_UNIT_TOPIC_LIST"),
    (312, "GET_HAS_UNIT_SUB_TOPIC_LIST"),
    (313, "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST"),
    (314, "CLONE_GROUP_OFFSET"),
    (315, "VIEW_BROKER_STATS_DATA"),
    (316, "CLEAN_UNUSED_TOPIC"),
    (317, "GET_BROKER_CONSUME_STATS"),
    (318, "UPDATE_NAMESRV_CONFIG"),
    (319, "GET_NAMESRV_CONFIG"),
    (320, "SEND_BATCH_MESSAGE"),
    (321, "QUERY_CONSUME_QUEUE"),
    (322, "QUERY_DATA_VERSION"),
    (323, "RESUME_CHECK_HALF_MESSAGE"),
    (324, "SEND_REPLY_MESSAGE"),
    (325, "SEND_REPLY_MESSAGE_V2"),
    (326, "PUSH_REPLY_MESSAGE_TO_CLIENT"),
    (327, "ADD_WRITE_PERM_OF_BROKER"),
    (351, "GET_TOPIC_CONFIG"),
    (352, "GET_SUBSCRIPTIONGROUP_CONFIG"),
    (353, "UPDATE_AND_GET_GROUP_FORBIDDEN"),
    (361, "LITE_PULL_MESSAGE"),
    (400, "QUERY_ASSIGNMENT"),
    (401, "SET_MESSAGE_REQUEST_MODE"),
    (402, "GET_ALL_MESSAGE_REQUEST_MODE"),
    (513, "UPDATE_AND_CREATE_STATIC_TOPIC"),
    (901, "GET_BROKER_MEMBER_GROUP"),
    (902, "ADD_BROKER"),
    (903, "REMOVE_BROKER"),
    (904, "BROKER_HEARTBEAT"),
    (905, "NOTIFY_MIN_BROKER_ID_CHANGE"),
    (906, "EXCHANGE_BROKER_HA_INFO"),
    (907, "GET_BROKER_HA_STATUS"),
    (908, "RESET_MASTER_FLUSH_OFFSET"),
    (328, "GET_ALL_PRODUCER_INFO"),
    (329, "DELETE_EXPIRED_COMMITLOG"),
    (1001, "CONTROLLER_ALTER_SYNC_STATE_SET"),
    (1002, "CONTROLLER_ELECT_MASTER"),
    (1003, "CONTROLLER_REGISTER_BROKER"),
    (1004, "CONTROLLER_GET_REPLICA_INFO"),
    (1005, "CONTROLLER_GET_METADATA_INFO"),
    (1006, "CONTROLLER_GET_SYNC_STATE_DATA"),
    (1007, "GET_BROKER_EPOCH_CACHE"),
    (1008, "NOTIFY_BROKER_ROLE_CHANGED"),
    (1009, "UPDATE_CONTROLLER_CONFIG"),
    (1010, "GET_CONTROLLER_CONFIG"),
    (1011, "CLEAN_BROKER_DATA"),
    (1012, "CONTROLLER_GET_NEXT_BROKER_ID"),
    (1013, "CONTROLLER_APPLY_BROKER_ID"),
    (1014, "BROKER_CLOSE_CHANNEL_REQUEST"),
    (1015, "CHECK_NOT_ACTIVE_BROKER_REQUEST"),
    (1016, "GET_BROKER_LIVE_INFO_REQUEST"),
    (1017, "GET_SYNC_STATE_DATA_REQUEST"),
    (1018, "RAFT_BROKER_HEART_BEAT_EVENT_REQUEST"),
    (2001, "UPDATE_COLD_DATA_FLOW_CTR_CONFIG"),
    (2002, "REMOVE_COLD_DATA_FLOW_CTR_CONFIG"),
    (2003, "GET_COLD_DATA_FLOW_CTR_INFO"),
    (2004, "SET_COMMITLOG_READ_MODE"),
)

UPSTREAM_REQUEST_CODES: Final[Mapping[int, str]] = MappingProxyType(dict(_CODES))
"""code -> upstream name, for every code upstream 5.2.0 defines (no two codes share a number)."""

_NEVER = "upstream 5.2.0 defines it but no server of its own handles it either"
_FILTER_SERVER = _NEVER + " (filter servers were removed in 5.x)"
_ACL1 = (
    "ACL 1.0 (plain_acl.yml, deprecated upstream): rocketrio serves ACL 2.0 only "
    "(AUTH_* 3001-3010, docs/hardening.md)"
)
_JRAFT = (
    "an event type inside upstream's JRaft controller's own Raft log, never sent by a broker or "
    "tool; rocketrio's controller runs its own Raft (RAFT_MESSAGE)"
)
_COLD = (
    "cold-data read throttling of upstream's page-cache store (coldDataFlowControlEnable); "
    "rocketrio's store has no such control"
)
_UNIT = "unit-mode topics (an isolation feature no 5.x client or tool uses); not implemented"

REFUSED_CODES: Final[Mapping[int, str]] = MappingProxyType(
    {
        **dict.fromkeys((13, 22, 23, 27, 47, 54, 209, 210, 211, 212, 213, 214, 1017), _NEVER),
        **dict.fromkeys((301, 302), _FILTER_SERVER),
        **dict.fromkeys((50, 51, 52, 53), _ACL1),
        **dict.fromkeys((1014, 1015, 1016, 1018), _JRAFT),
        **dict.fromkeys((2001, 2002, 2003), _COLD),
        2004: "switches upstream's commitlog read between mmap and pread; rocketrio has one read "
        "path",
        **dict.fromkeys((311, 312, 313), _UNIT),
        60: "the checkpoint of upstream's timing wheel (timerlog flush position, timer queue "
        "offsets); rocketrio's timers wait in rmq_sys_wheel_timer ConsumeQueues whose progress "
        "is delayOffset.json's timerOffsetTable (docs/secondary-messages.md)",
        61: "per-topic counts of waiting timers that upstream's timing wheel keeps; rocketrio's "
        "wheel keeps no per-timer state in RAM (topicStatus -t rmq_sys_wheel_timer shows what "
        "waits)",
        908: "upstream's slave keeps a one-off masterFlushedOffset (copied at start-up or set by "
        "this command) that only GET_BROKER_HA_STATUS shows; rocketrio's slave reports the "
        "confirmOffset its master announces live, so there is nothing to reset",
    }
)
"""code -> why rocketrio deliberately does not serve it: the census page's "refused" rows, and
the reason every role's REQUEST_CODE_NOT_SUPPORTED answer gives for that code."""
