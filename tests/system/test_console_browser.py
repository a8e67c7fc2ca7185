"""The console in a real headless Chromium (Debian's chromium and chromium-driver, driven by
Selenium; tests/install-browser.sh installs them, nothing is downloaded at test time), against a
real `rocketrio up` cluster of separate processes.

The page shows the broker set (master, MasterEpoch 1, SyncStateSet) and the controller; creating
a topic from the page without the token is refused by the server (the broker has no such topic
afterwards) and with the token works (the topic then appears in the page's topic table); after
kill -9 of the master the page shows the new master and MasterEpoch 2 within 2 s of the kill,
with an election in the event feed. Screenshots of each step are kept in tests/artifacts/.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness.paths import ARTIFACTS
from tests.harness.system import free_port_block, start_up

pytestmark = pytest.mark.system  # in conftest.XDIST_GROUPS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FAILOVER_ON_PAGE_S = 2.0

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "chromium and chromium-driver are not installed (tests/install-browser.sh installs them)",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def browser() -> Any:
    opts = Options()
    opts.binary_location = CHROMIUM or ""
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1700", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"):  # fmt: skip
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER or ""), options=opts)


def text_of(d: Any, css: str) -> str:
    """The rendered text of the first match, read in one script call (the page re-renders a
    section whenever it changes, so a found element can be replaced before it is read)."""
    return str(
        d.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", css
        )
    ).strip()


def wait(d: Any, check: Any, timeout: float, what: str) -> None:
    WebDriverWait(d, timeout, poll_frequency=0.05).until(lambda _d: check(), message=what)


def shot(d: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    d.save_screenshot(str(ARTIFACTS / f"console-{name}.png"))


def submit_topic(d: Any, topic: str, token: str) -> str:
    token_box = d.find_element(By.ID, "token")
    token_box.clear()
    if token:
        token_box.send_keys(token)
    name = d.find_element(By.ID, "topic-name")
    name.clear()
    name.send_keys(topic)
    d.find_element(By.ID, "topic-submit").click()
    wait(d, lambda: "…" not in text_of(d, "#action-status") and text_of(d, "#action-status")
         .startswith(("✔", "✘")), 15, "the action's answer")  # fmt: skip
    return text_of(d, "#action-status")


def pid_listening_at(up: Any, addr: str) -> int:
    """The pid `up` printed for the process at ``addr`` ("broker  broker-a-0 ADDR  pid N")."""
    for line in up.lines:
        if f" {addr} " in line and (m := re.search(r"pid (\d+)", line)):
            return int(m.group(1))
    raise AssertionError(f"no process at {addr} in: {up.lines}")


def test_console_in_chromium_shows_the_cluster_guards_actions_and_a_failover(
    tmp_path: Path,
) -> None:
    base = str(tmp_path / "c")
    port = free_port_block(1, extra=())
    up = start_up(base, "controller", "--console-port", str(port))
    d = None
    try:
        url = up.read_until(r"console (http://\S+)", 5).group(1)
        assert url == f"http://127.0.0.1:{port}/"
        token = Path(base, "console.token").read_text().strip()
        assert oct(os.stat(Path(base, "console.token")).st_mode & 0o777) == "0o600"
        d = browser()
        d.get(url)
        s = '.set[data-broker-name="broker-a"]'
        wait(d, lambda: text_of(d, "#conn-status") == "live", 15, "websocket live")
        wait(d, lambda: text_of(d, f"{s} .master-epoch") == "1", 15, "the broker set")
        wait(d, lambda: text_of(d, f"{s} .sync-state-set") == "{1,2}", 30, "both in sync")
        master = text_of(d, f"{s} .master")
        assert master.startswith("brokerId 1 at 127.0.0.1:"), master
        master_addr = master.rsplit(" ", 1)[1]
        assert "leader" in text_of(d, "#controllers tbody")
        assert "up" in text_of(d, "#namesrvs tbody")
        shot(d, "1-cluster")

        refused = submit_topic(d, "BrowserTopic", "")
        assert refused.startswith("✘") and "wrong or missing token" in refused, refused
        refused = submit_topic(d, "BrowserTopic", token[:-1] + ("x" if token[-1] != "x" else "y"))
        assert refused.startswith("✘"), refused
        time.sleep(2.5)  # a topics round later the page still has no such topic
        assert not d.find_elements(By.CSS_SELECTOR, '#topics tr[data-topic="BrowserTopic"]')
        done = submit_topic(d, "BrowserTopic", token)
        assert done.startswith("✔"), done
        wait(d, lambda: bool(d.find_elements(By.CSS_SELECTOR,
             '#topics tr[data-topic="BrowserTopic"]')), 10, "the new topic")  # fmt: skip
        shot(d, "2-topic-created")

        os.kill(pid_listening_at(up, master_addr), signal.SIGKILL)  # the master (brokerId 1)
        killed = time.monotonic()
        wait(
            d,
            lambda: (
                text_of(d, f"{s} .master-epoch") == "2"
                and text_of(d, f"{s} .master").startswith("brokerId 2 ")
            ),
            10,
            "the new master on the page",
        )
        seen = time.monotonic() - killed
        shot(d, "3-after-failover")
        assert seen <= FAILOVER_ON_PAGE_S, f"new master shown {seen:.2f} s after the kill"
        feed = text_of(d, "#feed")
        assert "masterEpoch 2: brokerId 2" in feed, feed
    finally:
        if d is not None:
            d.quit()
        up.stop()
