"""rocketrio actors/namesrv package."""
