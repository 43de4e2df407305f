"""Serve the viewer on 127.0.0.1 (read-only: GET only, nothing is written) or write its pages
as static files that open from disk."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from critiquelab.core.errors import UserError
from critiquelab.experiments.tracking.local_store import require_runs
from critiquelab.experiments.urls import http_url_problem
from critiquelab.experiments.viewer.data import ViewerData
from critiquelab.experiments.viewer.pages import index_page, pair_page, problem_page, run_page, slug

HOST = "127.0.0.1"  # never another interface: transcripts are research data, not a public site
DEFAULT_PORT = 8470
_RUN = r"([0-9A-Za-z_-]+)"
_ROUTES = (
    (re.compile(r"^/(?:index\.html)?$"), "index"),
    (re.compile(rf"^/runs/{_RUN}\.html$"), "run"),
    (re.compile(rf"^/problems/{_RUN}/([^/]+)\.html$"), "problem"),
    (re.compile(rf"^/pairs/{_RUN}/{_RUN}/([^/]+)\.html$"), "pair"),
)


DEFAULT_URL = f"http://{HOST}:{DEFAULT_PORT}"
# Where compare writes the compared runs' pages beside its report (its links' relative root), so
# the report's problem links open from disk, with no viewer running, and travel with the report.
REPORT_PAGES = "viewer"


def check_viewer_url(url: str, name: str = "viewer_url") -> str:
    """``url`` without a trailing slash, if it is an http(s) address a browser can open (the
    viewer's root: served, or an exported directory behind any web server); else UserError."""
    parts = urlsplit(url) if http_url_problem(url) is None else None
    if parts is None or parts.query or parts.fragment:
        raise UserError(f"{name} must be an http(s) URL such as {DEFAULT_URL} (got {url})")
    return url.rstrip("/")


def problem_link(viewer_url: str, run_id: str, task_id: str) -> str:
    """Where the viewer at ``viewer_url`` shows ``task_id``'s transcript under run ``run_id``
    (compare's failure attribution lists each problem here)."""
    return f"{viewer_url}/problems/{run_id}/{slug(task_id)}.html"


def pair_link(viewer_url: str, run_a: str, run_b: str, task_id: str) -> str:
    """Where the viewer at ``viewer_url`` shows ``task_id`` under two runs side by side
    (compare's report links each discordant problem here)."""
    return f"{viewer_url}/pairs/{run_a}/{run_b}/{slug(task_id)}.html"


class Viewer:
    """Pages by path, the same for the server and the static export."""

    def __init__(self, data: ViewerData) -> None:
        self.data = data

    def _task(self, run_id: str, page_slug: str) -> str:
        for problem in self.data.problems(run_id):
            if slug(problem.task_id) == page_slug:
                return problem.task_id
        raise UserError(f"run '{run_id}' has no problem '{page_slug}'")

    def page(self, path: str) -> str:
        """The page at ``path``; :class:`UserError` for a path that names nothing."""
        for pattern, kind in _ROUTES:
            match = pattern.match(path.split("?", 1)[0])
            if match is None:
                continue
            parts = match.groups()
            if kind == "index":
                return index_page(self.data.runs())
            if kind == "run":
                run = self.data.run(parts[0])
                return run_page(run, self.data.problems(run.run_id))
            if kind == "problem":
                run = self.data.run(parts[0])
                return problem_page(self.data, run, self._task(run.run_id, parts[1]))
            runs = (self.data.run(parts[0]), self.data.run(parts[1]))
            return pair_page(self.data, runs, self._task(runs[0].run_id, parts[2]))
        raise UserError(f"no page at '{path}'")

    def all_pages(self, run_id: str | Collection[str] | None = None) -> Iterator[tuple[str, str]]:
        """(path, html) of every page: the index, each pipeline run, each problem, and each problem
        whose outcome differs between two runs of one parent, side by side. ``run_id``: only the
        pipeline runs with this id or parent id (or any of these)."""
        every = self.data.runs()
        runs = [r for r in every if r.label]
        if run_id is not None:
            wanted = {run_id} if isinstance(run_id, str) else set(run_id)
            runs = [r for r in runs if wanted & {r.run_id, r.parent_id}]
            if not runs:
                named = ", ".join(sorted(wanted))
                raise UserError(f"run '{named}': no pipeline run with this id or parent id")
        # The index lists only the runs written here (and their parents), so every link resolves.
        shown = {r.run_id for r in runs} | {r.parent_id for r in runs}
        yield "index.html", index_page([r for r in every if r.run_id in shown])
        for run in runs:
            yield f"runs/{run.run_id}.html", self.page(f"/runs/{run.run_id}.html")
            for problem in self.data.problems(run.run_id):
                yield (f"problems/{run.run_id}/{slug(problem.task_id)}.html",
                       problem_page(self.data, run, problem.task_id))
        for a in runs:
            outcome_a = {p.task_id: p.status for p in self.data.problems(a.run_id)}
            for b in runs:
                if a.run_id == b.run_id or a.parent_id != b.parent_id:
                    continue
                for problem in self.data.problems(b.run_id):
                    if outcome_a.get(problem.task_id, problem.status) != problem.status:
                        yield (f"pairs/{a.run_id}/{b.run_id}/{slug(problem.task_id)}.html",
                               pair_page(self.data, (a, b), problem.task_id))


def export(viewer: Viewer, out: Path, run_id: str | Collection[str] | None = None) -> int:
    """Write every page under ``out`` (checked first: a directory that can take them); returns
    how many."""
    from critiquelab.experiments.paths import check_writable_dir

    check_writable_dir(out, "where the pages would go")
    count = 0
    for path, text in viewer.all_pages(run_id):
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        count += 1
    return count


def _handler(viewer: Viewer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                body, status = viewer.page(self.path).encode(), HTTPStatus.OK
            except UserError as exc:
                body, status = f"<p>{escape(str(exc))}</p>".encode(), HTTPStatus.NOT_FOUND
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: one line per page is noise
            return

    return Handler


def make_server(viewer: Viewer, port: int) -> ThreadingHTTPServer:
    """Bound to 127.0.0.1:``port`` (0: a free port); a taken port is bad input."""
    try:
        return ThreadingHTTPServer((HOST, port), _handler(viewer))
    except OSError as exc:
        raise UserError(f"view --port {port}: cannot listen on {HOST}:{port} ({exc.strerror})") from exc


def open_viewer(uri: str, run_id: str | None = None) -> tuple[Viewer, str]:
    """The viewer over the store at ``uri`` and the path of its first page (the run's, or the
    index). No store there yet, or an unknown run, is bad input: the viewer never creates a
    store."""
    require_runs(uri, "view")
    viewer = Viewer(ViewerData(uri))
    if run_id is None:
        return viewer, "/index.html"
    run = viewer.data.run(run_id)
    return viewer, f"/runs/{run.run_id}.html" if run.label else "/index.html"
