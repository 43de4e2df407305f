"""The project-wide pieces every layer may use: user-facing errors (:mod:`core.errors`), LM usage
accounting (:mod:`core.usage`), numbers YAML holds as text (:mod:`core.yaml_numbers`) and reading
another program's SQLite file without writing to it (:mod:`core.read_only_sqlite`). Imports nothing
of the project."""
