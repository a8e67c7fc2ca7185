"""The running system: Trio components and their runtime.

`runtime` (actors, ask/reply, supervision), `transport` (TCP and the simulated network),
`remoting` (connections), `logs` / `events` (structured logs and their catalogue), and one
package per role: `namesrv`, `broker`, `controller`, `raft`, `client`.
"""
