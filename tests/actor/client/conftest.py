"""The client's actor tests: Trio on the simulated network (pytest-trio), and the ones marked
``anyio`` on both loops."""

from tests.harness.anyio_backends import anyio_backend, pytest_collection_modifyitems

__all__ = ["anyio_backend", "pytest_collection_modifyitems"]
