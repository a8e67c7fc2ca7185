"""actors/broker/auth."""
