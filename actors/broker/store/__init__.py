"""actors/broker/store."""
