"""The Controller (RIP-44): `replicas_info` / `replica_state` (the replicated state machine),
`elect_policy`, `heartbeat_manager` (pure), `controller` + `failover` (the server on a Raft
node), `embedded` (inside a NameServer)."""
