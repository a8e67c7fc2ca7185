"""The `rocketrio` launcher: `main` (roles), `up` (local cluster), `admin`, `tools`
(produce / consume)."""
