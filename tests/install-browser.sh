#!/usr/bin/env bash
# Installs headless Chromium and its ChromeDriver for the browser tests (the report's,
# tests/analysis/test_report_browser.py, and the console's, tests/system/test_console_browser.py,
# which Selenium drives) from Debian's packages when they are missing; the README's test command
# runs this first. Without root or apt the tests skip and say why; this script never fails the
# test command.
set -u
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium and chromium-driver (Debian packages) for the browser tests ..." >&2
    if DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1; then
        exit 0
    fi
    echo "could not install chromium; the browser tests will be skipped" >&2
else
    echo "chromium or chromedriver missing and not root: the browser tests will be skipped" >&2
fi
exit 0
