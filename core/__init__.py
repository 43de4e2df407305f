"""The project-wide pieces every layer may use: user-facing errors (:mod:`core.errors`) and LM usage
accounting (:mod:`core.usage`). Imports nothing of the project."""
