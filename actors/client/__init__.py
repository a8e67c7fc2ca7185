"""Python clients: `producer`, `push_consumer`, `pull_consumer`, the synchronous `blocking`
facade, and `admin` / `controller_admin` for tools; `mq_client` is what they share."""
