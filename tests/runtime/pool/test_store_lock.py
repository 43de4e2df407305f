"""One process at a time on a local Chroma store (runtime/pool/store_lock.py): a second one is
refused at once with one line, and let in once the first has closed the store or died."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from support.held_store import store_held_elsewhere, try_in_another_process
from support.pool import HashEmbedder, make_message

from critiquelab.core.errors import UserError
from critiquelab.runtime.pool.chroma_process import ChromaProcessStore
from critiquelab.runtime.pool.chroma_store import ChromaPoolStore
from critiquelab.runtime.pool.store_lock import LOCK_NAME, HeldStores, StoreInUseError, lock_store


def _refusal(path: Path, pid: int) -> str:
    return (f"the Chroma store {path} is in use by another critiquelab process (pid {pid}); Chroma's local "
            "store allows one process at a time: wait for it to finish, or use another data directory "
            "(--home) or a Chroma server (pool.chroma_url)")


def test_a_second_process_is_refused_while_the_store_is_open_and_let_in_after_close(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    store = ChromaProcessStore(path, embedder=HashEmbedder())
    store.add(make_message())
    store.flush()
    # The store process holds the lock it inherited too: it outlives a parent killed mid-run.
    lock_file = path / LOCK_NAME
    assert any(Path(f"/proc/{store.pid}/fd/{fd}").resolve() == lock_file.resolve()
               for fd in os.listdir(f"/proc/{store.pid}/fd"))
    said = try_in_another_process(path, """
        from critiquelab.runtime.memory.episodic import EpisodicStore, stored_collections
        from critiquelab.runtime.pool.chroma_process import ChromaProcessStore
        from critiquelab.runtime.pool.chroma_store import ChromaPoolStore
        openers = [lambda: ChromaPoolStore(path), lambda: ChromaProcessStore(path),
                   lambda: EpisodicStore(path, collection="mem"), lambda: stored_collections(path)]
        for open_store in openers:
            try:
                open_store()
            except UserError as exc:
                print(exc)
        """)
    assert said.splitlines() == [_refusal(path, os.getpid())] * 4 + ["ok"]
    store.close()
    assert store._process.poll() is not None  # the store process is gone too
    said = try_in_another_process(path, """
        from support.pool import HashEmbedder
        from critiquelab.runtime.pool.chroma_store import ChromaPoolStore
        with ChromaPoolStore(path, embedder=HashEmbedder()) as store:
            print(store.count())
        """)
    assert said.splitlines() == ["1", "ok"]


def test_the_lock_goes_with_a_killed_holder(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    with store_held_elsewhere(path) as holder:
        with pytest.raises(StoreInUseError) as refused:
            ChromaPoolStore(path, embedder=HashEmbedder())
        assert str(refused.value) == _refusal(path, holder.pid)
        assert isinstance(refused.value, UserError)  # the CLI's one line and exit code 2
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        with ChromaPoolStore(path, embedder=HashEmbedder()) as store:  # no stale lock: flock, not a pid file
            store.add(make_message())
            store.flush()
            assert store.count() == 1
    assert try_in_another_process(path) == "ok"  # closing the store released it


def test_one_process_shares_its_lock_until_the_last_user_lets_go(tmp_path: Path) -> None:
    """Chroma shares one client per directory within a process: the run, its memory bank and a
    read of the same store may overlap there."""
    path = tmp_path / "chroma"
    first, second = lock_store(path), lock_store(tmp_path / "." / "chroma")  # the same store
    first.release()
    first.release()  # idempotent: does not drop the second's hold
    assert try_in_another_process(path) == _refusal(path, os.getpid())
    second.release()
    assert try_in_another_process(path) == "ok"


def test_held_stores_create_nothing_until_asked(tmp_path: Path) -> None:
    """A start checks early with ``take(create=False)``: a store never locked is not created then,
    so a start refused for another reason leaves nothing behind."""
    path = tmp_path / "home" / "chroma"
    with HeldStores([path]) as stores:
        stores.take(create=False)
        assert not (tmp_path / "home").exists()
        stores.take()
        assert (path / LOCK_NAME).read_text() == f"{os.getpid()}\n"
        with store_held_elsewhere(tmp_path / "other"), pytest.raises(StoreInUseError):
            HeldStores([tmp_path / "other"]).take(create=False)  # an existing lock file: checked
        assert try_in_another_process(path) == _refusal(path, os.getpid())
    assert try_in_another_process(path) == "ok"
