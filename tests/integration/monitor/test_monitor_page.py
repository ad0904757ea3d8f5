"""The monitor's web page in a real headless chromium (Debian's chromium + chromedriver):
the overview and a group page render the evaluation, the SVG charts are drawn, a link is
followed, the page updates itself without a reload, and a screenshot is kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.waiting import wait_until
from monitor_helpers import produce_to, running_monitor, scala_commit, scala_member, scala_owner
from webdriver import Browser

pytestmark = pytest.mark.slow


@pytest.fixture
def browser(tmp_path: Path):  # type: ignore[no-untyped-def]
    b = Browser(tmp_path / "chromium-profile", tmp_path / "chromedriver.log")
    yield b
    b.close()


def test_overview_and_group_page_in_chromium(zk_connect, zk_client, dev_broker, browser,
                                             tmp_path: Path) -> None:
    broker = dev_broker(num_partitions=2)
    scala_member(zk_client, "billing", "billing_h1-1", {"orders": 1})
    for p in (0, 1):
        end = produce_to(broker, "orders", p, 3)
        scala_owner(zk_client, "billing", "orders", f"0-{p}", "billing_h1-1-0")
        scala_commit(zk_client, "billing", "orders", f"0-{p}", end)
    scala_commit(zk_client, "audit", "orders", "0-0", 0)  # no members, lag behind: STOP
    with running_monitor(zk_connect) as mon:
        mon.wait_status("billing", "OK")
        mon.wait_status("audit", "STOP")
        for i in range(3):  # lag that comes and goes, so the charts have a shape
            polls = mon.monitor.state.polls
            end = produce_to(broker, "orders", i % 2, 20 * (i + 1))
            wait_until(lambda polls=polls: mon.monitor.state.polls >= polls + 2, what="2 polls")
            scala_commit(zk_client, "billing", "orders", f"0-{i % 2}", end)  # caught up
            wait_until(lambda polls=polls: mon.monitor.state.polls >= polls + 4, what="2 polls")

        browser.go(mon.url)
        wait_until(lambda: "billing" in browser.text() and "audit" in browser.text(),
                   what="overview rendered")
        text = browser.text()
        assert "Consumer groups" in text and "STOP" in text and "OK" in text
        assert "no live member owns the partition" in text  # audit's reason
        assert browser.script("return document.querySelectorAll('svg.sparkline').length") == 2
        rows = browser.script("return [...document.querySelectorAll('#groups tbody tr')]"
                              ".map(r => r.dataset.group + ' ' + r.cells[1].innerText)")
        assert rows == ["audit STOP", "billing OK"]
        shot = browser.screenshot(tmp_path / "monitor-overview.png")

        browser.click_link("billing")
        wait_until(lambda: browser.url().endswith("/groups/billing")
                   and "Lag per partition" in browser.text(), what="group page rendered")
        text = browser.text()
        assert "Members (1)" in text and "billing_h1-1" in text
        assert "Partitions (2)" in text and "billing_h1-1-0" in text
        cells = browser.script("return [...document.querySelectorAll('#partitions tbody tr')]"
                               ".map(r => [...r.cells].slice(0, 7).map(c => c.innerText))")
        assert [c[:3] for c in cells] == [["orders", "0-0", "billing_h1-1-0"],
                                          ["orders", "0-1", "billing_h1-1-0"]]
        assert all(c[6] in ("OK", "WARN") for c in cells), cells
        charts = browser.script("return [...document.querySelectorAll('svg.lag-chart')]"
                                ".map(s => s.querySelectorAll('path.series').length)")
        assert charts == [1, 2]  # total lag; one line per partition
        lag_path = browser.script("return document.querySelector('svg.lag-chart path.series')"
                                  ".getAttribute('d')")
        assert lag_path.count("L") >= 3, lag_path

        # the page refreshes in place: a new evaluation shows up without navigation
        stamp = browser.script("return document.getElementById('main').dataset.updated")
        browser.script("window.__same_page = true")
        wait_until(lambda: browser.script(
            "return document.getElementById('main').dataset.updated") != stamp,
            timeout=20, what="page refreshed itself")
        assert browser.script("return window.__same_page === true")
        group_shot = browser.screenshot(tmp_path / "monitor-group.png")
    print(f"\nscreenshots: {shot} {group_shot}")
    assert shot.stat().st_size > 10_000 and group_shot.stat().st_size > 10_000
