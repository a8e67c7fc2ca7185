"""actors/broker/schedule."""
