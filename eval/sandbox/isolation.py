"""Which isolation level this machine supports, and how to launch the sandbox server at it.

Levels, strongest first (the name is logged with every verdict and as an MLflow param):

``bwrap``
    bubblewrap: fresh user, pid, net, ipc, uts, mount and cgroup namespaces. The candidate sees
    read-only ``/usr`` and a size-capped private tmpfs, nothing of the host's files, no network
    interface at all (loopback included), no host process. The fork server is pid 1 of its
    namespace, so candidates can neither signal nor outlive it (when pid 1 exits the kernel
    kills the namespace). Run under a uid of its own when the harness is root, so RLIMIT_NPROC
    applies.
``setuid``
    No bubblewrap but the harness is root: the server runs as a random unused uid, so
    RLIMIT_NPROC works, file access is limited to world-readable files and a private 0700
    directory, and ``kill(-1)`` from that uid reaches exactly the candidate's processes.
    No network or filesystem namespace: a candidate can read world-readable files and reach
    the network.
``process``
    Neither: same uid as the harness, new session, rlimits. Weakest; for development only.

``CRITIQUELAB_SANDBOX_ISOLATION`` forces a (weaker) level, e.g. to test the fallbacks.
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

LEVELS = ("bwrap", "setuid", "process")
SANDBOX_UID = 65534  # what the candidate sees inside the namespace ("nobody")
_HERE = Path(__file__).resolve().parent
_SERVER_FILES = ("server.py", "codec.py", "output_sink.py")


def sandbox_python() -> str:
    """The interpreter candidates run under.

    The system interpreter, because a pyenv or virtualenv interpreter under ``/root`` is not
    readable by the unprivileged sandbox uid. Override with ``CRITIQUELAB_SANDBOX_PYTHON``.
    """
    override = os.environ.get("CRITIQUELAB_SANDBOX_PYTHON")
    if override:
        return override
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{version}", "/usr/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return sys.executable


def _fresh_uid() -> int:
    # A random uid far above any real account: no other process on the machine runs under
    # it, which is what makes kill(-1) and RLIMIT_NPROC exact.
    return 200_000 + secrets.randbelow(1_000_000_000)


def _drop_to(uid: int) -> Callable[[], None]:
    def drop() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    return drop


def _bwrap_argv(staging: str, disk_mb: int, python: str) -> list[str]:
    argv = [
        "bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
        "--as-pid-1", "--new-session", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
        "--ro-bind", "/usr", "/usr",
    ]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    size = str(disk_mb << 20)
    argv += [
        "--proc", "/proc", "--dev", "/dev",
        "--size", size, "--tmpfs", "/dev/shm",
        "--size", size, "--tmpfs", "/tmp",
        "--ro-bind", staging, "/sandbox",
        "--remount-ro", "/dev", "--remount-ro", "/",
        "--chdir", "/tmp", "--clearenv",
        "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
        "--setenv", "HOME", "/tmp",
        python, "-I", "-S", "-B", "/sandbox/server.py", "sweep=ns", "workdir=/tmp",
        "wipe=/dev/shm",
    ]
    return argv


@dataclass
class LaunchSpec:
    """Everything needed to start one sandbox server (and clean up after it)."""

    level: str
    argv: list[str]
    preexec: Callable[[], None] | None
    cleanup_dirs: list[str] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        """Allow-list environment: nothing of the harness's (API keys!) reaches the sandbox."""
        return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}


def _stage(uid: int | None) -> str:
    """Copy the server's files to a directory the sandbox uid can read."""
    import tempfile

    staging = tempfile.mkdtemp(prefix="critiquelab-sbx-")
    for name in _SERVER_FILES:
        shutil.copyfile(_HERE / name, os.path.join(staging, name))
        os.chmod(os.path.join(staging, name), 0o644)
    os.chmod(staging, 0o755)
    return staging


def launch_spec(level: str, disk_mb: int) -> LaunchSpec:
    """Build the command that starts a sandbox server at ``level``."""
    if level not in LEVELS:
        raise ValueError(f"unknown isolation level {level!r}; one of {LEVELS}")
    root = os.geteuid() == 0
    uid = _fresh_uid() if root else None
    staging = _stage(uid)
    python = sandbox_python()
    preexec = _drop_to(uid) if uid is not None else None
    if level == "bwrap":
        return LaunchSpec(level, _bwrap_argv(staging, disk_mb, python), preexec, [staging])
    import tempfile

    workdir = tempfile.mkdtemp(prefix="critiquelab-work-")
    if uid is not None:
        os.chown(workdir, uid, uid)
    os.chmod(workdir, 0o700)
    sweep = "uid" if level == "setuid" and uid is not None else "pgroup"
    if level == "setuid" and uid is None:
        raise ValueError("isolation level 'setuid' needs the harness to run as root")
    argv = [python, "-I", "-S", "-B", os.path.join(staging, "server.py"), f"sweep={sweep}",
            f"workdir={workdir}"]
    return LaunchSpec(level, argv, preexec if level == "setuid" else None, [staging, workdir])


def _probe_bwrap() -> bool:
    if shutil.which("bwrap") is None:
        return False
    spec = launch_spec("bwrap", 1)
    argv = [*spec.argv[:spec.argv.index(sandbox_python()) + 1], "-I", "-S", "-c", "print(7*6)"]
    try:
        done = subprocess.run(
            argv, preexec_fn=spec.preexec, env=spec.env(), capture_output=True, timeout=30,
            stdin=subprocess.DEVNULL,
        )
        return done.returncode == 0 and done.stdout.strip() == b"42"
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        for path in spec.cleanup_dirs:
            shutil.rmtree(path, ignore_errors=True)


@functools.cache
def detect_level() -> str:
    """The strongest level that works here (probes bubblewrap once per process)."""
    forced = os.environ.get("CRITIQUELAB_SANDBOX_ISOLATION", "").strip()
    if forced:
        if forced not in LEVELS:
            raise ValueError(f"CRITIQUELAB_SANDBOX_ISOLATION={forced!r}; use one of {LEVELS}")
        return forced
    if _probe_bwrap():
        return "bwrap"
    return "setuid" if os.geteuid() == 0 else "process"
