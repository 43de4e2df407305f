"""``--help`` is plain text a terminal shows as meant: no reST markup (``literal``, :mod:`x`)."""

import re

import pytest

from critiquelab.experiments.cli.main import main
from critiquelab.experiments.cli.parser import build_parser

REST = re.compile(r"``|:(?:mod|func|class|meth|attr|data):`")


def _verbs():
    return sorted(build_parser()._subparsers._group_actions[0].choices)


@pytest.mark.parametrize("argv", [[], *([verb] for verb in _verbs())], ids=lambda a: " ".join(a) or "top")
def test_help_is_plain_text(argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main([*argv, "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: critiquelab") and not REST.findall(text), text
    if not argv:
        assert "Run multi-agent code-generation experiments" in text
        assert "0 done, 1 check failed, 2 bad input, 3 service failed, 130 interrupted" in text
