"""Where the set-up's llama-server build is looked for, and when a build counts as there."""

import json

from critiquelab.experiments.serving.server_build import (
    BUILD_RECIPE,
    BUILD_RECORD,
    binary_path,
    cpu_flags_digest,
    find_built_server,
)


def _build(directory, record: object = None):
    directory.mkdir(parents=True)
    binary = directory / "llama-server"
    binary.write_bytes(b"\x7fELF")
    binary.chmod(0o755)
    if record is not None:
        (directory / BUILD_RECORD).write_text(json.dumps(record))
    return binary


def test_build_lives_in_the_model_cache_per_version_recipe_and_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("CRITIQUELAB_CACHE", str(tmp_path))
    path = binary_path()
    assert path.name == "llama-server"
    assert path.parent.parent == tmp_path / "llama-server"
    version, recipe, digest = path.parent.name.split("-")
    assert version.startswith("0.3.") and recipe == BUILD_RECIPE and digest == cpu_flags_digest()


def test_cpu_digest_follows_the_cpu_flags(tmp_path):
    one, other = tmp_path / "a", tmp_path / "b"
    one.write_text("processor : 0\nflags : fpu sse avx2\n")
    other.write_text("processor : 0\nflags : fpu sse avx2 avx512f\n")
    assert cpu_flags_digest(one) != cpu_flags_digest(other)
    same_flags_reordered = tmp_path / "c"
    same_flags_reordered.write_text("flags : avx2 fpu sse\n")
    assert cpu_flags_digest(one) == cpu_flags_digest(same_flags_reordered)


def test_a_complete_build_is_found_with_its_record(tmp_path):
    record = {"sdist": "llama_cpp_python-0.3.36.tar.gz", "llama_cpp_commit": "0c1e57098"}
    binary = _build(tmp_path / "b", record)
    built = find_built_server(binary)
    assert built is not None
    assert built.path == binary
    assert built.sdist == "llama_cpp_python-0.3.36.tar.gz" and built.llama_cpp_commit == "0c1e57098"


def test_a_build_without_its_record_or_binary_is_not_used(tmp_path):
    assert find_built_server(_build(tmp_path / "no-record")) is None
    assert find_built_server(_build(tmp_path / "bad-record", "not a mapping")) is None
    orphan_record = tmp_path / "no-binary"
    orphan_record.mkdir()
    (orphan_record / BUILD_RECORD).write_text("{}")
    assert find_built_server(orphan_record / "llama-server") is None
