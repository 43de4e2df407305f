"""Another process holding a local Chroma store's lock, as a second critiquelab process would."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Only the lock (no chromadb import): it starts in a fraction of a second.
_HOLDER = """
import sys
from critiquelab.runtime.pool.store_lock import lock_store
held = lock_store(sys.argv[1])
print("held", flush=True)
sys.stdin.read()  # until the test closes stdin or kills this process
"""


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


@contextlib.contextmanager
def store_held_elsewhere(path: Path) -> Iterator[subprocess.Popen[str]]:
    """A process holding the lock of the store in ``path`` until the block ends (or the test kills
    it: ``.pid``)."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        with contextlib.suppress(OSError):
            assert holder.stdin is not None
            holder.stdin.close()
        try:
            holder.wait(timeout=30)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()


def try_in_another_process(path: Path, body: str = "lock_store(path).release()") -> str:
    """What ``body`` (Python, with ``path`` bound; it may print) says in a fresh process, then
    ``ok``, or the one line of the :class:`~critiquelab.core.errors.UserError` it raised."""
    script = "\n".join([
        "import sys", "from pathlib import Path", "from critiquelab.core.errors import UserError",
        "from critiquelab.runtime.pool.store_lock import lock_store",
        f"sys.path.insert(0, {str(REPO / 'tests')!r})",
        "path = Path(sys.argv[1])", "try:", textwrap.indent(textwrap.dedent(body).strip(), "    "),
        "except UserError as exc:", "    print(exc)", "else:", "    print('ok')",
    ])
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                          env=_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
