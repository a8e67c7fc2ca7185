"""Synchronous file storage with explicit durability points (no Trio).

Messages: `commitlog`, `consume_queue`, `index_file`, `message_store` (+ `store_dispatch`,
`store_types`); configs: `config_store`; identity: `broker_identity`, `epoch_file`; the Raft log:
`raft_log`, `raft_segments`; shared fsync primitives: `durable`. Every file call goes through
the `fs.FileSystem` a class is given (`fs.OS_FS` by default), so simulations can run this code
on a simulated disk.
"""
