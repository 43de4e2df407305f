"""Every code example in the documentation runs, so a snippet or a command that stops working
fails the tests (issue #55).

Sybil reads each page's fenced blocks. A ``python`` block runs, the page's blocks in order in
one namespace, as a reader pasting them into a notebook would. In a ``bash`` block each
``critiquelab`` line is parsed by the CLI's own parser (an option that no longer exists fails
here), and runs too where it can without a model server or a placeholder: a line with
``--api-base`` (the scripted LM answers), ``--estimate``, ``--help`` or the ``pipelines`` verb;
it must exit 0. The endpoint the pages name, ``http://127.0.0.1:8000/v1``, is replaced by the
scripted LM's (:mod:`support.golden_lm`, which answers every role), and each page gets a data
directory and working directory of its own (the shipped specs reachable as ``experiments/…``);
a ``yaml`` block that starts with a comment naming a file (``# my_experiment.yaml``) is written
there first.
``<!-- skip: next -->`` before a block skips it (say why beside it).
"""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path
from typing import Any

import pytest
from support.fake_openai import FakeOpenAIServer
from support.golden_lm import golden_responder
from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

from critiquelab.experiments.cli.main import main
from critiquelab.experiments.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DOCUMENTED_ENDPOINT = "http://127.0.0.1:8000/v1"
PROGRAMS = ("critiquelab", ".venv/bin/critiquelab")


def _endpoint(example: Example) -> str:
    return str(example.namespace["__endpoint__"])


def _python(example: Example) -> None:
    source = "\n" * example.line + str(example.parsed).replace(DOCUMENTED_ENDPOINT, _endpoint(example))
    exec(compile(source, example.path, "exec"), example.namespace)


def command_lines(block: str) -> list[list[str]]:
    """The ``critiquelab`` commands of a shell block, each as its arguments after the program
    (continuation lines joined, comments and a ``$`` prompt dropped, ``a && b`` read as two)."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        for command in line.replace("&&", ";").split(";"):
            command = command.strip().removeprefix("$ ")
            if command.split(" ", 1)[0] in PROGRAMS:  # other lines may hold what shlex cannot read
                commands.append(shlex.split(command, comments=True)[1:])
    return commands


def runnable(argv: list[str]) -> bool:
    """Whether a documented command runs here, not only parses: it needs no model server of its
    own (the scripted LM stands in for the documented endpoint) and names no placeholder."""
    return (bool(argv) and argv[0] == "pipelines") or any(
        flag in argv for flag in ("--api-base", "--estimate", "--help"))


def _bash(example: Example) -> None:
    for argv in command_lines(str(example.parsed)):
        argv = [word.replace(DOCUMENTED_ENDPOINT, _endpoint(example)) for word in argv]
        where = f"{example.path}:{example.line}: critiquelab {shlex.join(argv)}"
        if "--help" not in argv:
            try:
                build_parser().parse_args(argv)
            except SystemExit as exc:
                raise AssertionError(f"{where}: the parser refuses it (exit {exc.code})") from None
        if runnable(argv):
            out, err = io.StringIO(), io.StringIO()
            quiet = ["--no-progress"] if argv[0] == "run" and "--estimate" not in argv else []
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main([*argv, *quiet])
            assert code == 0, f"{where}: exit {code}\n{err.getvalue()[-2000:]}"


def scripted_lm(problems: list[Any]) -> Any:
    """The golden LM; a problem it does not know (a page's own dataset) gets a reply with no
    code, which fails that problem as a real model's prose would, without failing the run."""
    golden = golden_responder(problems)

    def respond(messages: list[dict[str, Any]], body: dict[str, Any]) -> Any:
        try:
            return golden(messages, body)
        except StopIteration:  # the script looks the problem up among HumanEval's
            return "The scripted LM has no answer to this problem."

    return respond


def _yaml(example: Example) -> None:
    """A YAML block whose first line names a file (``# my_experiment.yaml``) is that file: written
    to the working directory, so the commands after it read it."""
    text = str(example.parsed)
    first = text.split("\n", 1)[0].removeprefix("#").strip()
    if text.startswith("#") and first.endswith((".yaml", ".yml")) and " " not in first:
        Path(first).write_text(text.replace(DOCUMENTED_ENDPOINT, _endpoint(example)))


SYBIL = Sybil(parsers=[CodeBlockParser("python", _python), CodeBlockParser("bash", _bash),
                       CodeBlockParser("yaml", _yaml), SkipParser()])
def _no_bundled_model(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a documented example would serve a bundled model: give it the documented "
                         f"endpoint ({DOCUMENTED_ENDPOINT}) or leave it to be parsed only")


# The README and the site's pages; docs/examples/ holds packages whose READMEs their own tests run.
SITE = sorted(path.relative_to(ROOT) for path in DOCS.rglob("*.md"))
PAGES = ["README.md", *(page.as_posix() for page in SITE if page.parts[1] != "examples")]


@pytest.mark.parametrize("page", PAGES)
def test_examples_run(page: str, humaneval_problems: list[Any], tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch, sandbox_tmpdir: Path) -> None:
    # A working directory of the page's own, where the shipped specs are where the pages say
    # (experiments/…) and what an example writes (my_problems.jsonl) does not land in the checkout.
    work = tmp_path / "work"
    work.mkdir()
    for shipped in ("experiments", "docs"):
        (work / shipped).symlink_to(ROOT / shipped)
    monkeypatch.chdir(work)
    monkeypatch.setenv("CRITIQUELAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TMPDIR", str(sandbox_tmpdir))
    # An example that would serve a bundled model (no --api-base) is to be parse-checked only:
    # here it fails at once instead of running the real model for minutes.
    monkeypatch.setattr("critiquelab.experiments.serving.provision.LocalModelServer", _no_bundled_model)
    document = SYBIL.parse(ROOT / page)
    with FakeOpenAIServer(scripted_lm(humaneval_problems), pass_body=True) as lm:
        document.namespace["__endpoint__"] = lm.api_base
        for example in document:
            example.evaluate()


def test_every_documented_command_is_checked() -> None:
    """The rules above see the commands a page shows: a line with leading spaces, a prompt, a
    continuation and a comment are all read."""
    block = "$ critiquelab run spec.yaml \\\n    --limit 2  # two\n  .venv/bin/critiquelab pipelines\nls\n"
    assert command_lines(block) == [["run", "spec.yaml", "--limit", "2"], ["pipelines"]]
    assert command_lines("scripts/setup.sh && critiquelab run s.yaml; ls") == [["run", "s.yaml"]]
    assert runnable(["run", "s.yaml", "--api-base", "u"]) and not runnable(["compare", "RUN_ID"])
