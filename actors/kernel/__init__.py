"""actors/kernel."""
