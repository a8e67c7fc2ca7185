"""actors/broker/tables."""
