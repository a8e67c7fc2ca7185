#!/usr/bin/env bash
# Installs everything the test suite needs into .venv, the Python packages and the browser at
# the same time (the README's test command runs this first, then pytest):
# - the project with its test, analysis and proxy extras, installed by uv (a resolver and
#   installer that downloads and unpacks in parallel: 99 s against pip's 160 s here on a cold
#   cache, most of either being pyspark's 450 MB sdist, which both build), itself
#   pip-installed into the fresh venv;
# - tests/install-browser.sh (Debian's Chromium and ChromeDriver for the two browser tests),
#   started first so its apt download overlaps the Python one; it never fails the command.
# Exits non-zero if the Python side fails.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/install-browser.sh &
browser=$!
python3 -m venv .venv
.venv/bin/pip install -q uv
.venv/bin/uv pip install -q --python .venv/bin/python -e '.[test,analysis,proxy]'
wait "$browser"
