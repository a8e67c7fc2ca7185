"""The one compiled module, `rocketrio.protocol._speedups` (everything else is in pyproject.toml).

Its sources are protocol/speedups/*.c (speedups.h says which file holds what).

It needs only a C compiler and the Python headers. ``optional=True``: an install without a
compiler still works on the pure-Python twins (tests/unit/protocol/test_speedups.py fails
there on purpose, so CI cannot silently test only the fallback).
"""

from glob import glob

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rocketrio.protocol._speedups",
            sources=sorted(glob("protocol/speedups/*.c")),
            depends=["protocol/speedups/speedups.h"],
            # only PyInit__speedups is exported; the shared helpers stay inside the module
            extra_compile_args=["-fvisibility=hidden"],
            optional=True,
        )
    ]
)
