"""actors/broker/roles."""
