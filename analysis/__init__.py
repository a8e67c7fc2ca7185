"""rocketrio analysis package."""
