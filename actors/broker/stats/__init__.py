"""actors/broker/stats."""
