#!/usr/bin/env bash
# Set up (idempotent) and run the test suite, including the end-to-end tests that run the
# real bundled model on a few problems. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Debian's Chromium and its driver for the viewer's browser tests (tests/experiments/viewer);
# without them those tests are skipped and say why.
if ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null) \
      || echo "test: could not install chromium; the browser tests will be skipped" >&2
  else
    echo "test: chromium-driver not found; the browser tests will be skipped" >&2
  fi
fi
.venv/bin/ruff check .
.venv/bin/mypy  # what it checks, and how strictly: [tool.mypy] in pyproject.toml
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 "$@"
