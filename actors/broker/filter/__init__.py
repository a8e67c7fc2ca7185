"""SQL92 property filtering on the broker (upstream broker/filter): see docs/sql92-filter.md."""
