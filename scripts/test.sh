#!/usr/bin/env bash
# Set up (idempotent) and run the test suite, including the end-to-end tests that run the
# real bundled model on a few problems. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
