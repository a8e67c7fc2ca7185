"""actors/broker/send."""
