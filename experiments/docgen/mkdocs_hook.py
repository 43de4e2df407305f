"""The MkDocs hook (``hooks:`` in mkdocs.yml) that adds the generated pages to the site at build
time: they exist only in the build, so there is no copy to fall behind the code."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from critiquelab.experiments.docgen import generated_pages


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = Path(config.config_file_path).parent
    for path, text in generated_pages(root).items():
        existing = files.get_file_from_path(path)
        if existing is not None:  # a placeholder page of the same name: the generated one wins
            files.remove(existing)
        files.append(File.generated(config, path, content=text))
    return files


# Docstrings cross-reference in Sphinx's roles (:func:`run`); rendered as Markdown, the role's name
# would be left in front of the code span it names.
_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc|obj):(?=<code>)")


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return _ROLE.sub("", html)
