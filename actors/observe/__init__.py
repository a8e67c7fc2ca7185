"""actors/observe."""
