"""rocketrio actors/client package."""
