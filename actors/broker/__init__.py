"""The Broker: `broker` (wiring and lifecycle), `store_actor` (the one writer, group commit),
request processors (`send_processor`, `pull_processor`, `client_processor`,
`admin_processor`), bookkeeping tables, and `replicas_manager` for controller mode."""
