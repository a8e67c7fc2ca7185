"""actors/broker/pop."""
