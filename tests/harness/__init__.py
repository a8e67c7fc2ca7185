"""Shared test helpers and the simulated twins of the network and the disk (tests/README.md).

Test modules import from here (``from tests.harness.broker import harness``); no module
imports a ``test_*`` module (tests/unit/test_import_rules.py checks it). Unit tests mirror the
product packages: ``tests/unit/<package path>/test_<module>[_<aspect>].py``.
"""
