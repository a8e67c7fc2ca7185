"""Deterministic simulators for the pure cores."""
