"""The project-wide pieces every layer may use: user-facing errors (:mod:`critiquelab.core.errors`), LM usage
accounting (:mod:`critiquelab.core.usage`), numbers YAML holds as text (:mod:`critiquelab.core.yaml_numbers`)
and reading another program's SQLite file without writing to it (:mod:`critiquelab.core.read_only_sqlite`).
Imports nothing of the project."""
