"""rocketrio actors/broker package."""
