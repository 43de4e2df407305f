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
# The documentation site, references generated from the code; --strict: a broken link or anchor, a
# page missing from the nav or an unresolved reference fails (its examples run in tests/docs).
site=$(mktemp -d)
LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 NO_MKDOCS_2_WARNING=1 \
  .venv/bin/mkdocs build --strict --quiet --site-dir "$site"
rm -rf "$site"
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 "$@"
