"""The Chroma message store in a child process, so persistence costs the experiment nothing.

Why a process and not only a thread: :class:`~critiquelab.runtime.pool.chroma_store.ChromaPoolStore` already
writes from a background thread, but importing chromadb (~0.4 s), opening its client (~0.3 s),
upserting and embedding are mostly Python and hold the GIL, so in a thread they slow the agents
down (measured: a cached critic-loop run 10–20 % slower). Here a ``ChromaPoolStore`` runs in a
child process; the parent only puts messages on a queue, which a feeder thread pickles into
the child's stdin. Requests (flush, reads, search, close) travel the same way, so a reply is
always given after every earlier ``add`` has reached the store.

Lifecycle: ``close`` (or the ``atexit`` hook on a normal exit) flushes and stops the child. If
the parent dies without exiting normally the child sees EOF on its stdin and flushes what it
has received before it exits.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from critiquelab.core.errors import ServiceError, UserError
from critiquelab.runtime.pool.chroma_store import DEFAULT_COLLECTION
from critiquelab.runtime.pool.embedder import Embedder
from critiquelab.runtime.pool.messages import Message
from critiquelab.runtime.pool.store_lock import StoreLock, adopt_store_lock, lock_store

log = logging.getLogger(__name__)
_STOP = object()  # tells the feeder thread to close the child's stdin
# How a crash in native code (Chroma's Rust and hnswlib, torch) ends the child. A damaged store
# crashes Chroma at its first read or write, so every later run would crash the same way.
_CRASHES = frozenset(getattr(signal, name) for name in ("SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL", "SIGFPE")
                     if hasattr(signal, name))


def child_main() -> None:
    """The child's loop (run as ``python -c``): apply requests from stdin in order and answer,
    on the original stdout, those that expect an answer. EOF on stdin means the parent is gone:
    flush what arrived and exit."""
    # Lowest CPU priority: importing chromadb and torch and embedding use only cores the
    # experiment (agents, sandboxes, a local LLM) leaves idle. When the parent waits for a
    # flush, the experiment is idle and the writes get the CPU.
    with contextlib.suppress(OSError, AttributeError):
        os.nice(19)
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints must not corrupt the reply stream
    options = pickle.load(requests)
    lock_fd = options.pop("lock_fd", None)
    if lock_fd is not None:  # the parent's lock on the store, inherited: this process may open it
        adopt_store_lock(options["path"], lock_fd)
    store: Any = None
    failure: BaseException | None = None
    try:
        from critiquelab.runtime.pool.chroma_store import ChromaPoolStore

        store = ChromaPoolStore(**options)
    except BaseException as exc:  # every later request answers with it
        failure = exc
    while True:
        try:
            op, args = pickle.load(requests)
        except EOFError:
            op, args = "close", ()
        if op == "add":
            if store is not None:
                store.add(args[0])
            continue
        try:
            if failure is not None:
                raise failure
            reply: tuple[str, Any] = ("ok", _apply(store, op, args))
        except BaseException as exc:
            reply = ("error", _picklable(exc))
        with contextlib.suppress(BrokenPipeError):
            pickle.dump(reply, replies)
            replies.flush()
        if op == "close":
            return


def _apply(store: Any, op: str, args: tuple[Any, ...]) -> Any:
    if op == "ready":
        return None
    if op == "pending":
        return store.pending
    if op == "get":
        where, since, until = args
        return store.get(where, since=since, until=until)
    if op == "search":
        text, where, k = args
        return store.search(text, where=where, k=k)
    if op in ("count", "flush", "close"):
        return getattr(store, op)(*args)
    raise ValueError(f"unknown message store request {op!r}")


def _picklable(exc: BaseException) -> BaseException:
    """``exc`` if it survives the trip to the parent, else a RuntimeError that names it (a reply
    that fails to pickle would be dropped by the queue and leave the parent waiting)."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class ChromaProcessStore:
    """A :class:`~critiquelab.runtime.pool.store.PoolStore` whose ``ChromaPoolStore`` lives in a child
    process. Same arguments and behaviour as ``ChromaPoolStore``; ``add`` never waits for the
    child, even while it is still starting."""

    searchable = True

    def __init__(
        self,
        path: Path | str | None = None,
        *,
        url: str | None = None,
        collection: str = DEFAULT_COLLECTION,
        embedder: Embedder | None = None,
        batch_size: int = 64,
    ):
        if path is not None and url is not None:
            raise UserError("ChromaPoolStore: give a directory or a server URL, not both")
        if path is None and url is None:
            raise ValueError("ChromaProcessStore needs a directory (path) or a Chroma server (url)")
        # A local store is locked here, in the caller's terms and before a child starts: a second
        # process on it is refused at once (runtime/pool/store_lock.py). The child inherits the
        # descriptor, so the store stays locked while the child still flushes after a parent died.
        self._store_lock: StoreLock | None = lock_store(path) if path is not None else None
        self._where = f"Chroma server {url}" if url is not None else f"Chroma store {path}"
        self._path = path
        options = {"path": str(path) if path is not None else None, "url": url, "collection": collection,
                   "embedder": embedder, "batch_size": batch_size}
        if self._store_lock is not None:
            options["lock_fd"] = self._store_lock.fd
        # A plain subprocess, not multiprocessing: spawn would re-run the caller's main script
        # (breaking scripts without a __main__ guard) and fork would copy other threads' locks.
        # Its own session: a terminal's Ctrl-C signals the whole process group, and the child
        # must outlive it so the parent's cleanup can still flush (EOF on stdin ends it).
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c",
                 "from critiquelab.runtime.pool.chroma_process import child_main; child_main()"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(p or "." for p in sys.path)},
                pass_fds=(self._store_lock.fd,) if self._store_lock is not None else (),
            )
        except BaseException:
            if self._store_lock is not None:
                self._store_lock.release()
            raise
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()  # one request/reply exchange at a time
        self._closed = False
        self._feeder = threading.Thread(target=self._feed, name=f"pool-feeder-{collection}", daemon=True)
        self._feeder.start()
        self._outbox.put(options)
        ref = weakref.ref(self)

        def close_at_exit() -> None:
            store = ref()
            if store is not None:
                with contextlib.suppress(Exception):
                    store.close()

        self._atexit_hook = close_at_exit
        atexit.register(close_at_exit)
        if url is not None:
            try:
                self._call("ready")  # an unreachable server is bad input, before anything runs
            except ServiceError as exc:
                with contextlib.suppress(Exception):
                    self.close()
                raise UserError(str(exc).replace("failed mid-run", "is not usable")) from exc

    def _feed(self) -> None:
        """Pickle queued items to the child: ``add`` only enqueues, so it never waits on the pipe."""
        pipe = self._process.stdin
        assert pipe is not None
        while True:
            item = self._outbox.get()
            if item is _STOP:
                break
            try:
                pickle.dump(item, pipe)
                pipe.flush()
            except (BrokenPipeError, OSError):
                break  # the child is gone; _call reports it
        with contextlib.suppress(OSError):
            pipe.close()  # EOF: the child closes its store and exits

    def _call(self, op: str, *args: Any) -> Any:
        with self._lock:
            self._check_alive()
            self._outbox.put((op, args))
            replies = self._process.stdout
            assert replies is not None  # opened with stdout=PIPE
            try:
                status, value = pickle.load(replies)
            except EOFError:
                raise ServiceError("the message store process died; see its error output above") from None
        if status == "error":
            if isinstance(value, UserError | ServiceError):
                raise value
            # Chroma (a server gone, a full disk) failing under the run: resumable, not a crash.
            first = (str(value).strip().splitlines() or [type(value).__name__])[0][:300]
            raise ServiceError(f"the message store ({self._where}) failed mid-run: {first}") from value
        return value

    def _check_alive(self) -> None:
        """A :class:`ServiceError` that says how the child ended, if it has (poll() does not wait)."""
        code = self._process.poll()
        if code is None:
            return
        if code >= 0:
            raise ServiceError(f"the message store process ({self._where}) has exited (code {code})")
        try:
            how = signal.Signals(-code).name
        except ValueError:
            how = f"signal {-code}"
        hint = ""
        if -code in _CRASHES and self._path is not None:
            hint = (f" (a crash in native code; if it recurs the store may be damaged: move {self._path} "
                    "aside or run with `pool: {persist: false}`)")
        raise ServiceError(f"the message store process ({self._where}) was killed by {how}{hint}")

    @property
    def pid(self) -> int:
        """The child process's id."""
        return self._process.pid

    # --- PoolStore ----------------------------------------------------------------------------

    def add(self, message: Message) -> None:
        if self._closed:
            raise RuntimeError("ChromaPoolStore is closed")
        # Nothing else asks the child during a run: a child that crashed would go unnoticed until
        # close, after the whole run's messages were lost (the feeder drops them on a broken pipe).
        self._check_alive()
        self._outbox.put(("add", (message,)))

    def get(
        self,
        where: Mapping[str, Any] | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> list[Message]:
        messages: list[Message] = self._call("get", dict(where) if where else None, since, until)
        return messages

    def search(self, text: str, *, where: Mapping[str, Any] | None = None, k: int = 5) -> list[Message]:
        messages: list[Message] = self._call("search", text, dict(where) if where else None, k)
        return messages

    def count(self) -> int:
        return int(self._call("count"))

    @property
    def pending(self) -> int:
        """Messages added but not yet persisted."""
        return int(self._call("pending"))

    def flush(self, timeout: float | None = None) -> None:
        self._call("flush", timeout)

    def close(self) -> None:
        """Flush, stop the child and wait for it; idempotent."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._atexit_hook)
        try:
            self._call("close")
        finally:
            self._outbox.put(_STOP)
            self._feeder.join(timeout=30)
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                log.error("message pool: the store process did not stop; killing it")
                self._process.kill()
            if self._process.stdout is not None:
                self._process.stdout.close()
            if self._store_lock is not None:  # the child is gone (or killed): its store is closed
                self._store_lock.release()

    def __enter__(self) -> ChromaProcessStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ChromaProcessStore"]
