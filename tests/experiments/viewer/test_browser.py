"""The viewer in a real browser: Debian's Chromium, headless, driven through chromium-driver
(both installed by scripts/test.sh). On failure a screenshot is saved under test-artifacts/."""

from __future__ import annotations

import contextlib
import shutil
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from support.viewer_run import LOST, SCRIPT

from critiquelab.experiments.compare.runs import compare_runs
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.experiments.viewer.pages import slug
from critiquelab.experiments.viewer.server import HOST, make_server, open_viewer

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    if CHROMEDRIVER is None:
        pytest.skip("chromium-driver is not installed (scripts/test.sh installs it)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


def serve_in_thread(viewer):
    """The viewer's server on a free port, in a daemon thread; it and its base URL."""
    server = make_server(viewer, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://{HOST}:{server.server_address[1]}"


@pytest.fixture(scope="module")
def served(viewer_home):
    home, result = viewer_home
    viewer, _ = open_viewer(tracking_uri(home))
    server, base = serve_in_thread(viewer)
    yield base, result
    server.shutdown()
    server.server_close()


@contextlib.contextmanager
def screenshot_on_failure(driver, name: str):
    try:
        yield
    except BaseException:
        ARTIFACTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))
        raise


def _load_ms(driver) -> float:
    return driver.execute_script(
        "const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd - t.startTime;"
    )


def test_run_list_filters_and_a_problem_shows_lanes_and_diffs(browser, served):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    base, result = served
    debate = next(c for c in result.children if c.pipeline == "debate")
    with screenshot_on_failure(browser, "run_list_and_problem"):
        browser.get(f"{base}/index.html")
        assert browser.find_elements(By.CSS_SELECTOR, "tr[data-pipeline]")
        Select(browser.find_element(By.ID, "pipeline-filter")).select_by_value("debate")
        shown = [r for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-pipeline]") if r.is_displayed()]
        assert [r.get_attribute("data-pipeline") for r in shown] == ["debate"]
        shown[0].find_element(By.TAG_NAME, "a").click()
        print(f"run list page: {_load_ms(browser):.0f} ms")
        Select(browser.find_element(By.ID, "status-filter")).select_by_value("failed")
        failed = [r for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-task]") if r.is_displayed()]
        assert [r.get_attribute("data-task") for r in failed] == [LOST]
        browser.find_element(By.ID, "task-search").send_keys("HumanEval/0")
        assert not any(r.is_displayed() for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-task]"))
        browser.get(f"{base}/problems/{debate.run_id}/{slug('HumanEval/0')}.html")
        print(f"problem page: {_load_ms(browser):.0f} ms")
        lanes = browser.find_element(By.CSS_SELECTOR, "svg.lanes")
        assert lanes.is_displayed() and len(lanes.find_elements(By.CSS_SELECTOR, "circle.mark")) >= 6
        labels = {e.text for e in lanes.find_elements(By.CSS_SELECTOR, "text.lane-label")}
        assert {"debater0", "debater1", "judge"} <= labels
        version = browser.find_elements(By.CSS_SELECTOR, "details.version")[2]
        version.find_element(By.TAG_NAME, "summary").click()
        assert version.find_element(By.CSS_SELECTOR, "pre.diff").is_displayed()
        # The model's <script> is text on the page, never run.
        assert browser.title.startswith("HumanEval/0") and browser.title != "pwned"
        assert SCRIPT in browser.find_element(By.TAG_NAME, "body").text


def test_a_discordant_problem_in_the_report_opens_both_transcripts(browser, served, viewer_home, tmp_path):
    from selenium.webdriver.common.by import By

    base, result = served
    home = viewer_home[0]
    report = result.comparison.files["html"]
    with screenshot_on_failure(browser, "report_link"):
        browser.get(report.resolve().as_uri())
        link = browser.find_element(By.CSS_SELECTOR, "a.discordant")
        assert LOST in link.text
        target = urlparse(link.get_attribute("href"))
        # By default the report links to the viewer pages written beside it: they open offline.
        assert target.scheme == "file" and Path(unquote(target.path)).is_file()
    # A report made for this test's viewer (served on a free port) links straight into it.
    pointed = compare_runs(result.parent_run_id, home=home, out=tmp_path / "report", log=False,
                           n_resamples=99, viewer_url=base + "/")
    with screenshot_on_failure(browser, "report_link_followed"):
        browser.get(pointed.files["html"].resolve().as_uri())
        browser.find_element(By.CSS_SELECTOR, "a.discordant").click()
        assert browser.current_url.startswith(base + "/")
        columns = browser.find_elements(By.CSS_SELECTOR, ".pair .column")
        assert [c.find_element(By.TAG_NAME, "h2").text.split()[0] for c in columns] == ["baseline", "debate"]
        assert all(c.find_element(By.CSS_SELECTOR, "svg.lanes").is_displayed() for c in columns)


@pytest.fixture(scope="module")
def served_patterns(pattern_home):
    home, result = pattern_home
    viewer, _ = open_viewer(tracking_uri(home))
    server, base = serve_in_thread(viewer)
    yield base, result
    server.shutdown()
    server.server_close()


def test_a_tree_search_problem_shows_its_search_tree_and_table(browser, served_patterns):
    from selenium.webdriver.common.by import By

    base, result = served_patterns
    search = next(c for c in result.children if c.pipeline == "tree_search")
    with screenshot_on_failure(browser, "search_tree"):
        browser.get(f"{base}/problems/{search.run_id}/{slug(search.results[0].task_id)}.html")
        print(f"tree-search problem page: {_load_ms(browser):.0f} ms")
        svg = browser.find_element(By.CSS_SELECTOR, "section.search svg.search-tree")
        nodes = svg.find_elements(By.CSS_SELECTOR, "g.search-node")
        rows = browser.find_elements(By.CSS_SELECTOR, "table.search-nodes tr.search-row")
        assert svg.is_displayed() and len(nodes) == len(rows) >= 3
        assert len(svg.find_elements(By.CSS_SELECTOR, "g.search-node.chosen")) == 1
        assert rows[0].is_displayed() and browser.title != "pwned"
        reflected = [r for r in rows if "<script>" in r.text]
        assert reflected and "compute the result" in reflected[0].text
