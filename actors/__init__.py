"""rocketrio actors package."""
