"""``critiquelab view``: static export, and bad input as one line with exit code 2."""

import socket

from critiquelab.experiments.cli.main import main


def test_view_out_writes_pages_that_open_from_disk(viewer_home, tmp_path, capsys):
    home, result = viewer_home
    out = tmp_path / "site"
    assert main(["view", result.parent_run_id, "--home", str(home), "--out", str(out)]) == 0
    assert "wrote 11 pages" in capsys.readouterr().out
    index = (out / "index.html").read_text()
    for child in result.children:
        assert f'href="runs/{child.run_id}.html"' in index
        assert (out / "runs" / f"{child.run_id}.html").is_file()


def test_view_bad_input_is_one_line_and_writes_nothing(viewer_home, tmp_path, capsys):
    home, _ = viewer_home
    empty = tmp_path / "empty"
    assert main(["view", "--home", str(empty)]) == 2
    assert f"view: no MLflow store at {empty / 'mlflow.db'} yet" in capsys.readouterr().err
    assert not empty.exists()
    assert main(["view", "nosuchrun", "--home", str(home)]) == 2
    assert "no such run" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        assert main(["view", "--home", str(home), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in err and len(err.strip().splitlines()) == 1


def _dead_links(out):
    """Every href and src of every written page that is not a written file (nor an anchor of
    the page it names): what would not open from disk, with nothing served."""
    import re
    from html import unescape
    from urllib.parse import unquote

    pages = [page.resolve() for page in out.rglob("*.html")]
    ids = {page: set(re.findall(r'\bid="([^"]+)"', page.read_text())) for page in pages}
    dead = []
    for page in ids:
        for href in re.findall(r'\b(?:href|src)="([^"]*)"', page.read_text()):
            if href.startswith("data:"):  # inline (the report's plots): nothing to open
                continue
            path, _, anchor = unquote(unescape(href)).partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.is_file() or (anchor and anchor not in ids.get(target, ())):
                dead.append(f"{page.relative_to(out.resolve())} -> {href}")
    return dead


def test_view_out_of_one_run_writes_an_index_of_it_alone_whose_links_all_resolve(
        tmp_path, capsys, humaneval_problems):
    from support.fake_openai import FakeOpenAIServer
    from support.role_responder import role_responder
    from support.specs import fake_spec
    from support.viewer_run import viewer_run

    from critiquelab.experiments.api import run

    home = tmp_path / "home"
    exported = viewer_run(home, humaneval_problems)
    scripts = {"coder": lambda text: {"code": "def f():\n    return 1\n"}}
    with FakeOpenAIServer(role_responder(scripts)) as fake:  # a second experiment, not exported
        other = run(fake_spec(fake.api_base, limit=1, pool={"persist": False}), home=home, progress=False)
    out = tmp_path / "site"
    assert main(["view", exported.parent_run_id, "--home", str(home), "--out", str(out)]) == 0
    index = (out / "index.html").read_text()
    assert other.parent_run_id not in index and other.children[0].run_id not in index
    assert all(child.run_id in index for child in exported.children)
    assert list(out.rglob("*.html")) and _dead_links(out) == []
    # The whole store: every experiment, still no dead link.
    everything = tmp_path / "all"
    assert main(["view", "--home", str(home), "--out", str(everything)]) == 0
    assert other.children[0].run_id in (everything / "index.html").read_text()
    assert _dead_links(everything) == []


def test_compare_report_links_open_from_disk(viewer_home, tmp_path):
    """The report's problem links point at pages written beside it (no viewer running); with
    --viewer-url they point at that live viewer instead, and no pages are written."""
    from critiquelab.experiments.compare.runs import compare_runs

    home, result = viewer_home
    out = tmp_path / "report"
    comparison = compare_runs(result.parent_run_id, home=home, out=out, log=False, n_resamples=99)
    html = comparison.files["html"].read_text()
    assert 'class="discordant" href="viewer/pairs/' in html  # debate lost a problem baseline solved
    assert "127.0.0.1" not in html and _dead_links(out) == []
    live = compare_runs(result.parent_run_id, home=home, out=tmp_path / "live", log=False, n_resamples=99,
                        viewer_url="http://127.0.0.1:8470")
    assert 'href="http://127.0.0.1:8470/pairs/' in live.files["html"].read_text()
    assert not (tmp_path / "live" / "viewer").exists()
