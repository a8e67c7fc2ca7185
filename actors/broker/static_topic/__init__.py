"""actors/broker/static_topic."""
