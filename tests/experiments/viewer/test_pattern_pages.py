"""Pattern panels on the problem pages of real (scripted-LM) runs of scratchpad, architect and
tree search: each panel where its data is, with a row, node or session per thing it shows."""

import re

import pytest
from support.pattern_runs import SCRIPT

from critiquelab.experiments.tracking.store import tracking_uri
from critiquelab.experiments.viewer.data import ViewerData
from critiquelab.experiments.viewer.pages import slug
from critiquelab.experiments.viewer.search_tree_panel import search_tree_panel
from critiquelab.experiments.viewer.server import Viewer
from critiquelab.runtime.pool.messages import Intent
from critiquelab.runtime.scratchpad.events import InitEvent, ScratchpadIntent
from critiquelab.runtime.scratchpad.replay import replay

ESCAPED = "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;"
PANELS = {"scratchpad": "<h2>Scratchpad</h2>", "architect": "<h2>Session tree</h2>",
          "tree_search": "<h2>Search tree</h2>"}


def _pages(pattern_home, pipeline):
    """(messages, page) of each problem of ``pipeline``'s run."""
    home, result = pattern_home
    data = ViewerData(tracking_uri(home))
    viewer = Viewer(data)
    child = next(c for c in result.children if c.pipeline == pipeline)
    found = []
    for problem in data.problems(child.run_id):
        _, messages = data.problem(child.run_id, problem.task_id)
        found.append((messages, viewer.page(f"/problems/{child.run_id}/{slug(problem.task_id)}.html")))
    assert len(found) == 2
    return found


@pytest.mark.parametrize("pipeline", sorted(PANELS))
def test_a_page_shows_its_own_pattern_panel_only(pattern_home, pipeline):
    for _, page in _pages(pattern_home, pipeline):
        assert [name for name, heading in PANELS.items() if heading in page] == [pipeline]


def test_scratchpad_panel_has_a_row_per_channel_event_and_the_replayed_values(pattern_home):
    for messages, page in _pages(pattern_home, "scratchpad"):
        init = next(m for m in messages if m.intent == ScratchpadIntent.INIT)
        channels = [c.name for c in InitEvent.model_validate_json(init.content).channels]
        assert re.findall(r'<table class="channel" data-channel="(\w+)">', page) == channels
        events = [m for m in messages if m.intent in (ScratchpadIntent.UPDATE, ScratchpadIntent.CONFLICT,
                                                      ScratchpadIntent.REFUSED)]
        assert page.count('<tr class="pad-event ') == len(events) > 0
        for channel in channels:
            table = re.search(rf'data-channel="{channel}">(.*?)</table>', page, re.S).group(1)
            assert table.count("<tr class=") == sum(m.metadata["channel"] == channel for m in events)
        # The last code row holds the code the replay ends with: the reviewed, right version.
        final = replay(messages, init.metadata["scratchpad_id"]).values["code"]
        code_table = re.search(r'data-channel="code">(.*?)</table>', page, re.S).group(1)
        assert "return None" not in code_table.rsplit("<tr class=", 1)[1]
        assert final.splitlines()[0] in code_table.rsplit("<tr class=", 1)[1]
        analysis = re.search(r'data-channel="analysis">(.*?)</table>', page, re.S).group(1)
        assert ESCAPED in analysis and SCRIPT not in page


def test_architect_panel_nests_a_session_per_delegation_and_review(pattern_home):
    for messages, page in _pages(pattern_home, "architect"):
        # The orchestrator's session is "architect" (named on its messages, or implied).
        sessions = {m.metadata.get("session") or "architect" for m in messages}
        assert len(sessions) >= 3  # the orchestrator's, a developer's, a review's
        assert page.count('<li class="session session-') == len(sessions)
        assert page.count('<li class="session session-orchestrator"') == 1
        developer = re.search(r'<li class="session session-developer".*?</ul></li>', page, re.S).group(0)
        assert "task main" in developer and "status completed" in developer
        reviewer = re.search(r'<li class="session session-reviewer".*?</ul></li>', page, re.S).group(0)
        assert "verdict approved" in reviewer
        # Sub-sessions sit inside the orchestrator's list.
        tree = page.split('<ul class="session-tree">', 1)[1]
        assert tree.index("session-orchestrator") < tree.index("session-developer")


def test_search_tree_panel_draws_every_node_and_tabulates_it(pattern_home):
    for messages, page in _pages(pattern_home, "tree_search"):
        verdict = next(m for m in reversed(messages) if m.intent == Intent.VERDICT)
        tree = verdict.metadata["tree"]
        assert len(tree) >= 3  # root, the wrong greedy draft, its repairs
        assert page.count('<g class="search-node') == len(tree) == page.count('<tr class="search-row')
        assert page.count('class="search-edge"') == len(tree) - 1
        chosen = verdict.metadata["chosen"]
        assert page.count('class="search-node chosen"') == 1
        assert f'<g class="search-node chosen" data-node="{chosen}">' in page
        reflected = [m.metadata["node"] for m in messages if m.intent == Intent.REFLECTION]
        assert reflected
        for node in reflected:
            row = re.search(rf'<tr class="search-row[^"]*" data-node="{node}">(.*?)</tr>', page).group(1)
            assert ESCAPED in row
        assert SCRIPT not in page


def test_search_tree_without_its_verdict_is_rebuilt_from_node_messages(pattern_home):
    messages, _ = _pages(pattern_home, "tree_search")[0]
    verdict = next(m for m in reversed(messages) if m.intent == Intent.VERDICT)
    unfinished = [m for m in messages if m is not verdict]
    panel = search_tree_panel(unfinished)
    assert panel.count('<g class="search-node') == len(verdict.metadata["tree"])
    assert 'class="search-node chosen"' not in panel
