"""Sans-io wire and file formats: bytes <-> typed attrs values, no sockets, no files.

`remoting` (frames), `codes`, `headers` / `controller_headers` / `bodies` (typed extFields and
JSON bodies, converted by `serde`), `message` (stored-message layout: `message_format`,
`message_build`, `message_decode`), `raft` (Raft RPCs and entries), `config` (key=value files).
"""
