"""rocketrio cli package."""
