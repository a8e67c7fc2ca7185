"""Generate the client's API reference (HTML) from its docstrings with pdoc.

    .venv/bin/python docs/api/build.py [OUT_DIR]     # default docs/api/html (not committed)

pdoc comes with ``pip install -e '.[docs]'`` (and the test extra). The reference covers the
public API, ``rocketrio.client`` (what its ``__all__`` names); everything else is internal.
tests/unit/client/test_api_reference.py builds it and checks every public name is documented.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pdoc
import pdoc.render

MODULES = ["rocketrio.client"]


def build(out_dir: Path) -> Path:
    """Write the reference to ``out_dir``; returns the client's page."""
    pdoc.render.configure(docformat="markdown", show_source=False, search=False)
    pdoc.pdoc(*MODULES, output_directory=out_dir)
    return out_dir / "rocketrio" / "client.html"


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "html"
    page = build(out)
    print(f"API reference: {page}")
