"""rocketrio actors/controller package."""
