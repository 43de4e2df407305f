"""The MkDocs hook (``hooks:`` in mkdocs.yml) that adds the generated pages to the site at build
time: they exist only in the build, so there is no copy to fall behind the code."""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from experiments.docgen import generated_pages


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = Path(config.config_file_path).parent
    for path, text in generated_pages(root).items():
        existing = files.get_file_from_path(path)
        if existing is not None:  # a placeholder page of the same name: the generated one wins
            files.remove(existing)
        files.append(File.generated(config, path, content=text))
    return files
