"""The controller's hand-written Raft.

Pure core: `core` (RaftCore, Ready), `election`, `replication`, `state`; settings: `config`;
the Trio shell: `node`.
"""
