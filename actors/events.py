"""The catalogue of log event names that tools read (the Spark job, system tests, the console).

Every process logs these names, and `analysis/` reads them by these constants, so producer and
consumer of the logs cannot drift apart. One name per happening, snake_case. Fields listed in the
comment are always present on that event.
"""

from __future__ import annotations

# process lifecycle
NAMESRV_BOOT = "namesrv_boot"  # addr
BROKER_BOOT = "broker_boot"  # broker, addr, cluster, broker_id
CONTROLLER_BOOT = "controller_boot"  # addr, peers
PROCESS_SHUTDOWN = "process_shutdown"  # reason
ACTOR_CRASHED = "actor_crashed"  # actor, restarting

# `rocketrio up`, the local supervisor (node "up", <dir>/logs/up.jsonl)
UP_STARTED = "up_started"  # mode, dir, pid, ports
CHILD_STARTED = "child_started"  # child, pid, restart (0: first start)
# child, pid, exit_code (None when killed by a signal), signal, ran_s, stopping (asked to stop),
# restart (the restart this exit leads to), next_delay_s, gave_up
CHILD_EXITED = "child_exited"
CHILD_STOP_ESCALATED = "child_stop_escalated"  # child, pid, grace_s (SIGKILL after the grace)
UP_STOPPING = "up_stopping"  # reason
UP_STOPPED = "up_stopped"  # reason, exit_code

# storage
COMMITLOG_RECOVERED = "commitlog_recovered"  # max_offset, truncated_at, dropped_bytes
COMMITLOG_TRUNCATED = "commitlog_truncated"  # offset, dropped_bytes, reason
# segment, offset, reason (+ topic, queue_id, queue_offset, group): a record failed its check
# on the read path and was not served
COMMITLOG_RECORD_CORRUPT = "commitlog_record_corrupt"
# store, error, remark (+ file, offset): recovery found damage it must not cut; start refused
STORE_CORRUPT = "store_corrupt"
CHECKPOINT_CORRUPT = "checkpoint_corrupt"  # path: a checkpoint failed its CRC; full scan done
STARTUP_FAILED = "startup_failed"  # role, error, traceback: the process exits non-zero
PROCESS_FAILED = "process_failed"  # role, error, traceback: failed after it started; exits 1
CONSUME_QUEUE_REBUILT = "consume_queue_rebuilt"  # topic, queue_id, entries
FLUSH_SLOW = "flush_slow"  # duration_ms

# namesrv
BROKER_REGISTERED = "broker_registered"  # cluster, broker, broker_id, addr
BROKER_UNREGISTERED = "broker_unregistered"  # broker, broker_id, addr, reason
BROKER_EXPIRED = "broker_expired"  # broker, addr, silent_ms (heartbeat timeout)
MIN_BROKER_ID_CHANGED = "min_broker_id_changed"  # broker, min_broker_id, min_broker_addr, notify

# messaging
TOPIC_UPDATED = "topic_updated"  # topic, read_queues, write_queues, perm
TOPIC_DELETED = "topic_deleted"  # topic
SEND_ACKED = "send_acked"  # sampled: topic, queue_id, offset, count
CONSUMER_GROUP_CHANGED = "consumer_group_changed"  # group, members
REBALANCE = "rebalance"  # group, client_id, queues
MESSAGE_TO_DLQ = "message_to_dlq"  # group, topic, msg_id, reconsume_times
# group, topic, timestamp, force, offsets ({"broker:queue": offset}), members (pushed 220 to)
OFFSET_RESET = "offset_reset"
# group, topic, client_id, queues ({"broker:queue": offset}): a member restarted its queues there
OFFSET_RESET_APPLIED = "offset_reset_applied"
GROUP_OFFSET_CLONED = "group_offset_cloned"  # src_group, dest_group, topics

# raft / controller
RAFT_ROLE_CHANGED = "raft_role_changed"  # term, role, leader
RAFT_LEADER_ELECTED = "raft_leader_elected"  # term, leader
RAFT_VOTE_RESULT = "raft_vote_result"  # term, outcome
RAFT_LOG_TRUNCATED = "raft_log_truncated"  # index
RAFT_SNAPSHOT_TAKEN = "raft_snapshot_taken"  # index, term
RAFT_LEADER_READY = "raft_leader_ready"  # term (the leader applied its own no-op)
RAFT_NODE_STARTED = "raft_node_started"  # term, last_index
RAFT_PEER_UNREACHABLE = "raft_peer_unreachable"  # peer
RAFT_PEER_REACHABLE = "raft_peer_reachable"  # peer
BROKER_HEARTBEAT_TIMEOUT = "broker_heartbeat_timeout"  # broker, broker_id, reason
ELECT_MASTER = "elect_master"  # broker, master_id, epoch, reason
ELECT_MASTER_FAILED = "elect_master_failed"  # broker, reason
# the leader asked the other controller replicas before deposing a master (upstream #4800)
# cluster, broker, broker_id, reason, dead, alive, unknown, no_answer, quorum, group_size,
# elapsed_ms: confirmed -> the election goes ahead; not confirmed -> the master stays
MASTER_DEATH_CONFIRMED = "master_death_confirmed"
MASTER_DEATH_NOT_CONFIRMED = "master_death_not_confirmed"
NOTIFY_BROKER_ROLE_CHANGED_FAILED = "notify_broker_role_changed_failed"  # broker, addr
SYNC_STATE_SET_CHANGED = "sync_state_set_changed"  # broker, sync_state_set, epoch
BROKER_ID_APPLIED = "broker_id_applied"  # broker, broker_id
BROKER_ROLE_CHANGED = "broker_role_changed"  # broker, broker_id, broker_role, epoch

# replication (AutoSwitch HA) and broker roles
HA_CONNECTED = "ha_connected"  # side (master/slave), peer, slave_id
HA_HANDSHAKE = "ha_handshake"  # slave_id, master_max, epoch, epochs (master side) / plan (slave)
HA_CONNECTION_CLOSED = "ha_connection_closed"  # side, peer, slave_id, reason
HA_TRUNCATED = "ha_truncated"  # from_offset, to_offset, matched_epoch, from_epoch, to_epoch
HA_LOG_RESET = "ha_log_reset"  # from_min, from_max, to_offset, reason (local data discarded)
EPOCH_RECORDED = "epoch_recorded"  # epoch, start_offset, source (master/replicated)
SYNC_STATE_SET_PROPOSED = "sync_state_set_proposed"  # broker, change, proposed, applied, epoch
SYNC_STATE_SET_ACCEPTED = "sync_state_set_accepted"  # broker, sync_state_set, epoch
SYNC_STATE_SET_REFUSED = "sync_state_set_refused"  # broker, proposed, code, remark
CONFIRM_OFFSET_MOVED = "confirm_offset_moved"  # sampled: offset, side
SEND_NOT_ACKED = "send_not_acked"  # sampled: reason, count
MASTER_FIRST_WRITE = "master_first_write"  # broker, epoch, offset
MASTER_ELECTION_REQUESTED = "master_election_requested"  # broker, broker_id, reason
MASTER_STEPPED_DOWN = "master_stepped_down"  # broker, epoch, reason


# ACL 2.0 (actors/auth, actors/broker/auth_*)
AUTH_REFUSED = "auth_refused"  # code, user, source_ip, remark (NO_PERMISSION answered)
AUTH_USER_INITIALIZED = "auth_user_initialized"  # user (initAuthenticationUser / inner creds)
AUTH_USER_CREATED = "auth_user_created"  # user, by
AUTH_USER_UPDATED = "auth_user_updated"  # user, by
AUTH_USER_DELETED = "auth_user_deleted"  # user, by
AUTH_ACL_UPDATED = "auth_acl_updated"  # subject, by (createAcl / updateAcl)
AUTH_ACL_DELETED = "auth_acl_deleted"  # subject, resource, by
AUTH_SYNCED = "auth_synced"  # master, users, acls (a slave adopted its master's tables)
# remoting server limits (issue 7); the WARN ones are rate-limited per server and carry
# ``suppressed`` (lines not written since the last one)
BAD_FRAME = "bad_frame"  # remote, reason, error (the connection is closed)
CONNECTION_REFUSED = "connection_refused"  # remote, reason, why (over a connection cap)
CONNECTION_READ_TIMEOUT = "connection_read_timeout"  # remote, buffered, missing, timeout_s
CONNECTION_IDLE_CLOSED = "connection_idle_closed"  # remote, idle_s (info)
REQUEST_REFUSED_BUSY = "request_refused_busy"  # code, remote, in_flight, limit
PULL_HOLD_REFUSED = "pull_hold_refused"  # topic, queue_id, group, why (over a held-pull bound)
# live config (UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG / UPDATE_CONTROLLER_CONFIG)
# role, key, old, new, persisted_to (None: started without a config file), by: one per key
CONFIG_UPDATED = "config_updated"
CONFIG_UPDATE_REFUSED = "config_update_refused"  # role, keys, code, remark, by

ALL = frozenset(v for k, v in dict(globals()).items() if k.isupper() and isinstance(v, str))
