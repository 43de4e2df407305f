"""The viewer's pages from a real tracking store: runs, problems, transcripts, paired views,
static export, runs in progress (read back from traces) and escaping of model-written text."""

from html.parser import HTMLParser

import pytest
from support.viewer_run import LOST, SCRIPT

from critiquelab.core.errors import UserError
from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.experiments.viewer.data import ViewerData
from critiquelab.experiments.viewer.pages import slug
from critiquelab.experiments.viewer.server import Viewer, export, open_viewer


class _Scripts(HTMLParser):
    """Counts <script> elements: the viewer's own script is the only one a page may have."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def handle_starttag(self, tag, attrs):
        self.count += tag == "script"


def _scripts_in(page):
    parser = _Scripts()
    parser.feed(page)
    return parser.count


def test_problem_page_shows_lanes_cards_versions_and_escapes_model_text(viewer_home):
    home, result = viewer_home
    viewer = Viewer(ViewerData(tracking_uri(home)))
    debate = next(c for c in result.children if c.pipeline == "debate")
    page = viewer.page(f"/problems/{debate.run_id}/{slug('HumanEval/0')}.html")
    assert '<svg class="lanes"' in page and page.count('class="lane"') == 4  # orchestrator, 2 debaters, judge
    assert "<h2>Debate</h2>" in page and "solution 1 is simplest" in page
    assert page.count('class="version') == 5  # 2 proposals, 2 arguments, the verdict
    # each role call's rendered prompt and raw reply, as the LM client saw them
    assert page.count("rendered prompt</h4>") == 5 and page.count("raw reply</h4>") == 5
    assert "def has_close_elements" in page and "[[ ## argument ## ]]" in page
    assert _scripts_in(page) == 1 and SCRIPT not in page
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page


def test_run_page_lists_every_problem_and_the_index_every_pipeline_run(viewer_home):
    home, result = viewer_home
    viewer = Viewer(ViewerData(tracking_uri(home)))
    index = viewer.page("/")
    for child in result.children:
        assert f"runs/{child.run_id}.html" in index
    debate = next(c for c in result.children if c.pipeline == "debate")
    page = viewer.page(f"/runs/{debate.run_id}.html")
    assert page.count("<tr data-status=") == 3
    assert 'data-status="failed" data-reason="' in page and LOST in page


def test_export_writes_pages_that_link_to_each_other(viewer_home, tmp_path):
    home, result = viewer_home
    viewer, _ = open_viewer(tracking_uri(home), result.parent_run_id)
    count = export(viewer, tmp_path, result.parent_run_id)
    baseline, debate = result.children
    pair = tmp_path / "pairs" / baseline.run_id / debate.run_id / f"{slug(LOST)}.html"
    assert pair.is_file() and count == 1 + 2 + 6 + 2  # index, runs, problems, both orders of the pair
    assert "baseline" in pair.read_text() and "debate" in pair.read_text()


def test_a_run_in_progress_is_read_from_its_traces(viewer_home):
    home, result = viewer_home
    data = ViewerData(tracking_uri(home))
    debate = next(c for c in result.children if c.pipeline == "debate")
    finished = data.problem(debate.run_id, LOST)
    traced_problems, traced_messages = data._from_traces(debate.run_id)
    expected = sorted(p.task_id for p in data.problems(debate.run_id))
    assert sorted(p.task_id for p in traced_problems) == expected
    assert [m.id for m in traced_messages[LOST]] == [m.id for m in finished[1]]


def test_unknown_run_and_missing_store_are_one_line_errors(viewer_home, tmp_path):
    home, _ = viewer_home
    with pytest.raises(UserError, match=r"view: no MLflow store at .*mlflow\.db yet"):
        open_viewer(tracking_uri(tmp_path))
    assert not (tmp_path / "mlflow.db").exists()
    with pytest.raises(UserError, match="no such run"):
        open_viewer(tracking_uri(home), "0123456789abcdef")


def test_pages_of_a_run_in_progress_reload_themselves(viewer_home):
    from dataclasses import replace

    from critiquelab.experiments.viewer.pages import run_page

    home, result = viewer_home
    data = ViewerData(tracking_uri(home))
    finished = data.run(result.children[0].run_id)
    problems = data.problems(finished.run_id)
    assert 'http-equiv="refresh"' not in run_page(finished, problems)
    assert 'http-equiv="refresh"' in run_page(replace(finished, status="RUNNING"), problems)


def test_a_page_name_fits_a_file_system_whatever_the_task_id(tmp_path):
    """A dataset's task ids have no length limit; a file name has at most 255 bytes."""
    long_a, long_b = "x" * 10_000 + "a", "x" * 10_000 + "b"
    for task_id in (long_a, "ü/" * 300, "HumanEval/0"):
        (tmp_path / f"{slug(task_id)}.html").write_text("page")  # an OSError if the name is too long
    assert slug(long_a) != slug(long_b)
    assert slug("HumanEval/0").startswith("HumanEval_0-")
