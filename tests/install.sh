#!/usr/bin/env bash
# Installs everything the test suite needs into .venv, the Python packages and the browser at
# the same time (the README's test command runs this first, then pytest):
# - the project with its test, analysis and proxy extras, installed by uv (a resolver and
#   installer that downloads and unpacks in parallel: 99 s against pip's 160 s here on a cold
#   cache, most of either being pyspark's 450 MB sdist, which both build), itself
#   pip-installed into the fresh venv;
# - bytecode for everything installed and for the project's own sources, written now: the suite
#   starts hundreds of Python processes (brokers, NameServers, CLI runs, Spark's workers), and
#   where PYTHONDONTWRITEBYTECODE is set (as on this project's VM) none of them may
#   write a .pyc, so each compiled every module it imported from source, ~0.35 s of CPU per
#   process start (`rocketrio admin` 1.25 -> 0.9 s; four process-heavy test files 70 -> 41 s,
#   docs/testing.md). Python reads a .pyc whatever that variable says, and ignores one whose
#   source changed since;
# - tests/install-browser.sh (Debian's Chromium and ChromeDriver for the two browser tests),
#   started first so its apt download overlaps the Python one; it never fails the command.
# Exits non-zero if the Python side fails.
set -euo pipefail
cd "$(dirname "$0")/.."
tests/install-browser.sh &
browser=$!
python3 -m venv .venv
.venv/bin/pip install -q uv
.venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python -e '.[test,analysis,proxy]'
.venv/bin/python -m compileall -q -j 0 actors analysis cli client protocol storage tests bench > /dev/null
wait "$browser"
