"""What the tests of stopping a run share: a responder that hangs on cue, the runs a stop left
open, the message store's process of a command, and a reader that keeps a pseudo-terminal from
filling up."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from support.fake_openai import Hang, humaneval_responder


def open_runs(home):
    """The runs of the data directory's store still RUNNING (a stop must mark them KILLED)."""
    from mlflow.tracking import MlflowClient

    from critiquelab.experiments.tracking.store import tracking_uri

    client = MlflowClient(tracking_uri(home))
    experiments = [e.experiment_id for e in client.search_experiments()]
    return [r.info.run_name for r in client.search_runs(experiments) if r.info.status == "RUNNING"]


def hangs_once_on_the_second_problem(problems):
    """A responder that "hangs" for a minute the first time it is asked the second problem (the
    event says when), and answers everything else."""
    entered = threading.Event()
    healthy = humaneval_responder(problems)
    stuck = problems[1].prompt.strip()

    def respond(messages):
        if any(stuck in str(m.get("content", "")) for m in messages) and not entered.is_set():
            entered.set()
            return Hang(60)
        return healthy(messages)

    return entered, respond


def store_process(parent: int) -> int:
    """The pid of ``parent``'s message store process (runtime/pool/chroma_process.py): the
    newest one alive, should an earlier test in the same process have left one behind."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            state, ppid, started = fields[0], int(fields[1]), int(fields[19])
            if ppid != parent or state == "Z":
                continue
            if b"child_main" in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append((started, int(entry)))
    assert found, f"process {parent} has no message store process"
    return max(found)[1]



def drain(fd, stop):
    """Read the terminal's output until told to stop (a full pty would block the command)."""
    import select

    with contextlib.suppress(OSError):
        while not stop.is_set():
            if select.select([fd], [], [], 0.1)[0] and not os.read(fd, 1 << 16):
                return

