"""Where things are, for tests at any depth of tests/: the repository, the golden files, the
drivers the system tests start as separate processes, and the artifacts folder."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
GOLDEN_ADMIN_BODIES = TESTS / "golden" / "admin-bodies"
DRIVERS = TESTS / "harness" / "drivers"
ARTIFACTS = TESTS / "artifacts"
