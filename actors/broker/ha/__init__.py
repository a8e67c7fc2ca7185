"""AutoSwitch HA (RIP-44): replication between the brokers of one broker set.

Pure cores (no I/O, no clock): `truncation` (the slave's consistent point), `slave_core` and
`master_core` (the two connection state machines; the master's decides what to send next),
`sync_state` (SyncStateSet, confirmOffset and the ack policies). Shells that move bytes and call
the store: `master_service` (HA listener, a reader and a writer task per slave),
`slave_client`, `group_transfer` (answers sends) and `service` (what a role change does).
"""
