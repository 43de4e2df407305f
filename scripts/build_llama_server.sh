#!/usr/bin/env bash
# Build llama.cpp's llama-server for the bundled models (parallel slots, per-slot prompt cache).
# Source: the llama.cpp tree vendored in the llama-cpp-python sdist of the version installed in
# .venv (the pin in pyproject.toml), downloaded by pip with its SHA-256 checked against the one
# recorded below (PyPI's). Native CPU flags; cached under the model cache directory per version
# and CPU, so a second set-up does not rebuild. Prints one line; exit 1 if the build failed (the
# harness then serves with llama-cpp-python, as before).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}

# PyPI's SHA-256 of llama_cpp_python-<version>.tar.gz, per pinned version.
declare -A SDIST_SHA256=(
  [0.3.36]=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
)

# Without AMX kernels where they apply (scripts/no_amx.sh says why).
source scripts/no_amx.sh
NO_AMX_CMAKE_FLAGS=()
[ -z "$NO_AMX" ] || NO_AMX_CMAKE_FLAGS=("-DCMAKE_C_FLAGS=$NO_AMX" "-DCMAKE_CXX_FLAGS=$NO_AMX")

fail() { echo "llama-server: not built ($1); the local model is served by llama-cpp-python"; exit 1; }

target=$("$PY" -m critiquelab.experiments.serving.server_build 2>/dev/null) || fail "cannot import critiquelab.experiments.serving.server_build"
if [ -x "$target" ] && [ -f "$(dirname "$target")/build.json" ]; then
  echo "llama-server: cached at $target"
  exit 0
fi
version=$("$PY" -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))') \
  || fail "llama-cpp-python is not installed"
sha=${SDIST_SHA256[$version]:-}
[ -n "$sha" ] || fail "no recorded SHA-256 for the llama-cpp-python $version sdist in $0"
command -v cmake >/dev/null && command -v c++ >/dev/null || fail "cmake and a C++ compiler are needed"

cache=$(dirname "$(dirname "$target")")
mkdir -p "$cache" || fail "cannot create $cache"
work=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf "$work"' EXIT
log="$cache/build-$version.log"
start=$(date +%s)
(
  set -e
  echo "llama-cpp-python==$version --hash=sha256:$sha" > "$work/requirements.txt"
  timeout 600 "$PY" -m pip download -q --no-deps --no-binary :all: --require-hashes \
    -r "$work/requirements.txt" -d "$work"
  tar -xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
  src="$work/llama_cpp_python-$version"
  # The vendored commit, from the sdist's changelog entry for this version.
  commit=$(awk -v v="## [$version]" '$0 == v {on=1; next} on && /^## \[/ {exit}
    on && match($0, /llama\.cpp@[0-9a-f]+/) {print substr($0, RSTART + 10, RLENGTH - 10); exit}' \
    "$src/CHANGELOG.md")
  flags=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON "${NO_AMX_CMAKE_FLAGS[@]}" -DBUILD_SHARED_LIBS=OFF -DGGML_CCACHE=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
    "-DLLAMA_BUILD_COMMIT=${commit:-unknown}")
  cmake -S "$src/vendor/llama.cpp" -B "$work/build" "${flags[@]}"
  timeout 3000 cmake --build "$work/build" --config Release --target llama-server -j2
  "$work/build/bin/llama-server" --version
  mkdir -p "$work/out"
  cp "$work/build/bin/llama-server" "$work/out/llama-server"
  cat > "$work/out/build.json" <<EOF
{"sdist": "llama_cpp_python-$version.tar.gz", "sdist_sha256": "$sha",
 "llama_cpp_commit": "${commit:-unknown}", "build_s": $(( $(date +%s) - start )),
 "cmake_flags": "${flags[*]}"}
EOF
) > "$log" 2>&1
# Checked here, not with `||` on the subshell: that would switch off its `set -e`.
[ $? = 0 ] || fail "build failed after $(( $(date +%s) - start ))s, see $log"
# Into place in one step: a concurrent set-up sees either no build or a complete one.
rm -rf "$(dirname "$target")"
mv "$work/out" "$(dirname "$target")" || fail "cannot move the build into $(dirname "$target")"
echo "llama-server: built in $(( $(date +%s) - start ))s from llama_cpp_python-$version.tar.gz (sha256 ${sha:0:12}…), $target"
