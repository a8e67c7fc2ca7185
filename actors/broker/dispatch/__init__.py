"""actors/broker/dispatch."""
