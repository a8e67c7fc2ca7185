"""rocketrio protocol package."""
