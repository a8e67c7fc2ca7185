"""actors/broker/pull."""
