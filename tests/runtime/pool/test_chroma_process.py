"""ChromaProcessStore: the Chroma store in a child process behind a MessagePool."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.pool import HashEmbedder, make_message

from critiquelab.core.errors import UserError
from critiquelab.runtime.pool.chroma_process import ChromaProcessStore
from critiquelab.runtime.pool.chroma_store import ChromaPoolStore
from critiquelab.runtime.pool.message_pool import MessagePool

REPO = Path(__file__).resolve().parents[3]


def _script(body: str) -> str:
    return textwrap.dedent(
        f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(REPO / "tests")!r})
        from support.pool import HashEmbedder, make_message
        from critiquelab.runtime.pool.chroma_process import ChromaProcessStore
        from critiquelab.runtime.pool.message_pool import MessagePool
        """
    ) + textwrap.dedent(body)


def _run(script: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


def test_publishes_do_not_wait_and_a_later_session_reads_everything_in_order(tmp_path: Path) -> None:
    store = ChromaProcessStore(tmp_path, embedder=HashEmbedder(delay=0.05))
    with MessagePool(store) as pool:
        start = time.monotonic()
        sent = [pool.publish(make_message(task_id="A", summary=f"m{i}")) for i in range(40)]
        assert time.monotonic() - start < 0.5  # while the child is still importing chromadb
        pool.flush()
        assert store.pending == 0 and store.count() == 40
        assert [m.id for m in store.get({"task_id": "A"})] == [m.id for m in sent]
        assert len(pool.search("m7", k=3)) == 3
    with MessagePool(ChromaProcessStore(tmp_path, embedder=HashEmbedder())) as later:
        assert [m.id for m in later.history(task_id="A")] == [m.id for m in sent]
    with ChromaPoolStore(tmp_path, embedder=HashEmbedder()) as direct:  # the same on-disk format
        assert direct.count() == 40


def test_a_normal_exit_without_close_loses_nothing(tmp_path: Path) -> None:
    done = _run(_script(f"""
        pool = MessagePool(ChromaProcessStore({str(tmp_path)!r}, embedder=HashEmbedder(delay=0.05)))
        for i in range(30):
            pool.publish(make_message(summary=str(i)))
        """))
    assert done.returncode == 0, done.stderr
    with ChromaProcessStore(tmp_path, embedder=HashEmbedder()) as store:
        assert store.count() == 30


def test_a_killed_parent_still_gets_what_reached_the_child_written(tmp_path: Path) -> None:
    done = _run(_script(f"""
        pool = MessagePool(ChromaProcessStore({str(tmp_path)!r}, embedder=HashEmbedder()))
        for i in range(10):
            pool.publish(make_message(summary=str(i)))
        pool.store.count()  # a round trip: every earlier message has reached the child
        print(pool.store.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """))
    assert done.returncode == -9
    child = int(done.stdout.strip())
    deadline = time.monotonic() + 60
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:  # it exits after EOF
        time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists(), "the store process outlived its parent"
    with ChromaPoolStore(tmp_path, embedder=HashEmbedder()) as direct:
        assert direct.count() == 10


def test_ctrl_c_in_a_terminal_loses_nothing(tmp_path: Path) -> None:
    """A terminal's Ctrl-C signals the whole foreground process group; the store process must
    survive it so the parent's cleanup can still flush to it."""
    script = _script(f"""
        signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored
        pool = MessagePool(ChromaProcessStore({str(tmp_path)!r}, embedder=HashEmbedder(delay=0.05)))
        try:
            for i in range(20):
                pool.publish(make_message(summary=str(i)))
            print("published", flush=True)
            time.sleep(60)
        except KeyboardInterrupt:
            pool.close()
            print("closed", flush=True)
        """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "published"
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: the parent and its children
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and out.strip() == "closed", err
    with ChromaPoolStore(tmp_path, embedder=HashEmbedder()) as direct:
        assert direct.count() == 20


def test_errors_reach_the_caller(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(UserError, match="cannot create the message store directory"):
        ChromaProcessStore(blocker / "chroma")
    with pytest.raises(UserError, match="cannot reach the Chroma server"):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        ChromaProcessStore(url=f"http://127.0.0.1:{port}")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "chroma.sqlite3").write_bytes(b"this is not a sqlite database" * 100)
    store = ChromaProcessStore(corrupt, embedder=HashEmbedder())
    store.add(make_message())
    with pytest.raises(UserError, match="cannot open the message store"):
        store.flush()
    with pytest.raises(UserError, match="cannot open the message store"):
        store.close()
    store.close()  # idempotent


def test_a_store_process_lost_mid_run_is_a_service_error(tmp_path: Path) -> None:
    """The CLI turns it into one line and exit code 3 (resumable), not a traceback."""
    from critiquelab.core.errors import ServiceError

    store = ChromaProcessStore(tmp_path / "chroma", embedder=HashEmbedder())
    store.add(make_message())
    store.flush()
    os.kill(store.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while store._process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(ServiceError, match=r"message store process .* was killed by SIGKILL"):
        store.count()
    with pytest.raises(ServiceError, match="message store process"):  # not dropped by the feeder
        store.add(make_message())
    with pytest.raises(ServiceError, match="message store process"):
        store.close()  # nothing can be flushed any more: said, not hidden
    store.close()  # idempotent
