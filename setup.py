"""The one compiled module, `rocketrio.protocol._speedups` (everything else is in pyproject.toml).

It needs only a C compiler and the Python headers. ``optional=True``: an install without a
compiler still works on the pure-Python twins (tests/unit/protocol/test_speedups.py fails
there on purpose, so CI cannot silently test only the fallback).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rocketrio.protocol._speedups",
            sources=["protocol/_speedups.c"],
            optional=True,
        )
    ]
)
