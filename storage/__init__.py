"""rocketrio storage package."""
