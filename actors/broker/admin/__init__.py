"""actors/broker/admin."""
