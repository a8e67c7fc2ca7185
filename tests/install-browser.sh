#!/usr/bin/env bash
# Installs headless Chromium for the report's browser test (tests/analysis/test_report_browser.py)
# from Debian's packages when it is missing; the README's test command runs this first.
# Without root or apt the test skips and says why; this script never fails the test command.
set -u
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium (Debian package) for the browser test ..." >&2
    if DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; then
        exit 0
    fi
    echo "could not install chromium; the browser test will be skipped" >&2
else
    echo "chromium missing and not root: the browser test will be skipped" >&2
fi
exit 0
