"""Synchronous file storage with explicit durability points (no Trio).

Messages: `commitlog` (a package: log, segments, recovery, fence, read check), `consume_queue`
and `consume_queue_store`, `index_file`, and `message_store`, the facade composed of its parts
(`store_put`, `store_read`, `store_dispatch` with `dispatch_request` and `dispatch_gate`,
`store_repair`; types in `store_types`); configs: `config_store`; identity: `broker_identity`,
`epoch_file`; the Raft log: `raft_log`, `raft_segments`; shared fsync primitives: `durable`.
Every file call goes through the `fs.FileSystem` a class is given (`fs.OS_FS` by default), so
simulations can run this code on a simulated disk.
"""
