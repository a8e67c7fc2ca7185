"""AutoSwitch HA (RIP-44): replication between the brokers of one broker set.

Pure cores (no I/O, no clock): `truncation` (the slave's consistent point), `transfer_plan` (what
the master sends next), `slave_core` and `master_core` (the two connection state machines),
`sync_state` (SyncStateSet, confirmOffset and the ack policies). Shells that move bytes and call
the store: `master_service` (HA listener, one connection task per slave) and `slave_client`.
"""
