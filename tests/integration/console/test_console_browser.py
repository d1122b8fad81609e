"""`minibroker console` in a real browser (Debian's chromium, headless, through chromedriver and selenium)
against a real local cluster: the page loads; producing moves a partition's log end offset and then its high
watermark, and the bytes DescribeLogDirs reports for the topic and each replica; the SIGSTOP button on a
follower turns its bar late and, once replica.lag.time.max.ms has passed, out of the ISR on the page and on the
timeline (an IsrShrink event); SIGCONT brings it back (IsrExpand). Then the other buttons, each with what
follows it on the timeline: SIGKILL of a follower (its leader's IsrShrink, the controller's BrokerFailure), KILL
of the active controller (the standby's ControllerFailover), restart of the killed broker (it serves again,
though a controller is dead, and an IsrExpand takes it back). One cluster for all of it: the suite's time.

Screenshots go to the test's tmp dir, and to $CONSOLE_SCREENSHOTS_DIR when set (docs/images/ holds two).
"""

from __future__ import annotations

import re
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from client import Admin, NewTopic, Producer
from local_cluster.cluster import LocalCluster
from tests.integration.conftest import StartProcess, WaitUntil
from tests.integration.console.console_browser import headless_chromium, screenshot

pytestmark = pytest.mark.integration


TOPIC = "console"
# Small, so the test sees the shrink soon; the fetch wait must stay below it (KafkaConfig checks).
LAG_MAX_MS = 3000
# A SIGKILLed broker's registration lasts its ZooKeeper session: short, so the BrokerFailure comes soon.
SESSION_TIMEOUT_MS = 6000


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    with headless_chromium() as driver:
        yield driver


class _Load:
    """Records produced to the topic from a thread until stopped, a few hundred a second."""

    def __init__(self, bootstrap: str) -> None:
        self._producer = Producer(bootstrap, acks=1, linger_ms=20)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            for _ in range(20):
                self._producer.send(TOPIC, f"record {i}".encode(), partition=0)
                i += 1
            self._stop.wait(0.05)

    def __enter__(self) -> _Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._producer.close(timeout=5)


def test_the_console_shows_replication_and_what_each_fault_button_does(
        data_dir: Path, processes: StartProcess, browser: webdriver.Chrome, wait_until: WaitUntil,
        tmp_path: Path) -> None:
    cluster = LocalCluster(data_dir)
    info = cluster.up(brokers=3, controllers=2, overrides=[f"replica.lag.time.max.ms={LAG_MAX_MS}",
                                                           f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"])
    with Admin(info.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 3)])
        leader = admin.describe_topics([TOPIC])[0].partitions[0].leader

    console = processes("console", [sys.executable, "-m", "minibroker.cli", "console", "--data-dir",
                                    str(data_dir), "--port", "0", "--allow-faults"])
    urls: list[str] = []

    def console_url() -> bool:
        urls.extend(re.findall(r"http://127\.0\.0\.1:\d+/", console.log()))
        return bool(urls)

    wait_until(console_url, 60, "the console to print its URL")
    browser.get(urls[0] + f"?topic={TOPIC}")
    name = f"{TOPIC}-0"

    # The page redraws on every picture: each read is one script, so no element goes stale under it.
    def bar(broker_id: int) -> dict[str, str]:
        return browser.execute_script(
            "const row = document.querySelector(arguments[0]);"
            "return row ? Object.assign({}, row.dataset) : {};",
            f'[data-partition="{name}"] .replica[data-broker="{broker_id}"]') or {}

    def partition(attribute: str) -> int:
        value = browser.execute_script(
            "const p = document.querySelector(arguments[0]); return p ? p.dataset[arguments[1]] : null;",
            f'[data-partition="{name}"]', attribute)
        return int(value) if value is not None else -1

    def timeline(kind: str, of_partition: bool = True) -> list[str]:
        """The page's timeline entries of `kind`, of the partition shown (or, for the faults and the events of
        no one partition, all)."""
        return browser.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map((e) => e.textContent);",
            f'#timeline li[data-kind="{kind}"]' + (f'[data-topic-partition="{name}"]'
                                                   if of_partition and kind != "Fault" else ""))

    def topic_bytes() -> int:
        value = browser.execute_script(
            "const t = document.querySelector(arguments[0]); return t ? t.dataset.bytes : null;",
            f'#topics tr[data-topic="{TOPIC}"]')
        return int(value) if value is not None else -1

    wait_until(lambda: partition("hw") == 0 and bar(leader).get("state") == "in-sync", 60,
               "the page to show the empty partition")
    followers = [b for b in (1, 2, 3) if b != leader]
    follower = followers[0]

    with _Load(info.bootstrap_servers):
        # The leader's log end offset moves first; the high watermark follows once the followers fetched.
        wait_until(lambda: int(bar(leader).get("leo") or 0) > 0, 60, "the leader's LEO to move on the page")
        wait_until(lambda: partition("hw") > 0, 60, "the high watermark to move on the page")
        moved_from = partition("hw")
        wait_until(lambda: partition("hw") > moved_from, 60, "the high watermark to keep moving under load")
        # DescribeLogDirs on the Kafka listeners: the bytes of the topic and of each replica.
        wait_until(lambda: topic_bytes() > 0 and int(bar(leader).get("size") or -1) > 0, 60,
                   "the topic's and the leader replica's bytes on the page")
        screenshot(browser, tmp_path, "console-partition-under-load.png")

        browser.find_element(By.ID, f"fault-sigstop-{follower}").click()
        try:
            wait_until(lambda: bar(follower).get("state") == "late", 30, f"broker {follower}'s bar to turn late")
            assert bar(follower)["inIsr"] == "true"  # late, not out yet: replica.lag.time.max.ms has not passed
            wait_until(lambda: bar(follower).get("state") == "out" and bar(follower).get("inIsr") == "false",
                       60, f"broker {follower} to leave the ISR on the page")
            wait_until(lambda: timeline("IsrShrink"), 30, "the ISR shrink on the timeline")
            assert f"replica.lag.time.max.ms {LAG_MAX_MS}" in timeline("IsrShrink")[0]
            wait_until(lambda: bar(followers[1]).get("state") == "in-sync", 30, "the other follower to stay in")
            screenshot(browser, tmp_path, "console-isr-shrink.png")
        finally:
            browser.find_element(By.ID, f"fault-sigcont-{follower}").click()

        wait_until(lambda: bar(follower).get("state") == "in-sync" and bar(follower).get("inIsr") == "true", 60,
                   f"broker {follower} to rejoin the ISR on the page")
        wait_until(lambda: timeline("IsrExpand"), 30, "the ISR expand on the timeline")
        faults = " ".join(timeline("Fault"))
        assert f"SIGSTOP broker {follower}" in faults and f"SIGCONT broker {follower}" in faults

        # SIGKILL the follower: its leader drops it once replica.lag.time.max.ms passes, and the controller
        # sees its registration go once its session expires.
        shrinks, expands = len(timeline("IsrShrink")), len(timeline("IsrExpand"))
        browser.find_element(By.ID, f"fault-sigkill-{follower}").click()
        wait_until(lambda: len(timeline("IsrShrink")) > shrinks, 60, "the ISR shrink after SIGKILL on the timeline")
        wait_until(lambda: any(f"brokers [{follower}] left /brokers/ids" in e
                               for e in timeline("BrokerFailure", of_partition=False)), 60,
                   "the controller's BrokerFailure on the timeline")
        wait_until(lambda: bar(follower).get("state") == "offline", 30, f"broker {follower}'s bar offline")

        # KILL the active controller: the standby wins /controller once the killed one's session expires.
        browser.find_element(By.ID, "fault-kill-controller").click()
        killed: list[str] = []

        def controller_killed() -> bool:
            killed.extend(re.findall(r"SIGKILL active controller (\d+)", " ".join(timeline("Fault"))))
            return bool(killed)

        wait_until(controller_killed, 30, "the controller's kill on the timeline")
        standby = next(f"controller-{c.id}" for c in info.controllers if str(c.id) != killed[0])
        wait_until(lambda: any(f" {standby}" in e for e in timeline("ControllerFailover", of_partition=False)), 90,
                   f"{standby}'s ControllerFailover on the timeline")

        # Restart the killed broker, a controller dead: it serves again and its leader takes it back.
        browser.find_element(By.ID, f"fault-restart-{follower}").click()
        wait_until(lambda: any(f"broker {follower} serves again" in e for e in timeline("Fault")), 90,
                   f"broker {follower}'s restart to succeed on the timeline")
        assert not any("failed" in e for e in timeline("Fault")), timeline("Fault")
        wait_until(lambda: len(timeline("IsrExpand")) > expands, 60, "the ISR expand after the restart")
        wait_until(lambda: bar(follower).get("state") == "in-sync" and bar(follower).get("inIsr") == "true", 60,
                   f"broker {follower} in sync again on the page")
    # At a phone's width the page is one column: nothing wider than the screen.
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    wait_until(lambda: browser.execute_script("return document.documentElement.scrollWidth") <= 390, 10,
               "the page to fit a phone's width")
    screenshot(browser, tmp_path, "console-phone.png")
    console.signal(signal.SIGTERM)
    assert console.wait(30) == 0

