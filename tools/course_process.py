"""How the grader (tools/course_grade.py) runs a test process: in a session of its own, with a
time limit, optionally stopped at the first line of its output that a check picks out.

A stop is how an item ends at the emulator's first memory error or race
(tools/course_memory_errors.py): from that report on the item scores 0, so the
cases after it would only spend the item's time limit failing.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def signal_name(returncode: int) -> str:
    """'SIGSEGV (segmentation fault)' for a process killed by a signal (returncode -11)."""
    try:
        sig = signal.Signals(-returncode)
        return f"{sig.name} ({signal.strsignal(sig).lower()})"
    except ValueError:
        return f"signal {-returncode}"


def run_watched(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float,
                stop: Callable[[str], bool] | None = None) -> tuple[int | None, str, float, str | None]:
    """Runs cmd in a session of its own, reading its stdout+stderr as it comes; (returncode or
    None on timeout, the output, seconds, the line that stopped it or None). When `stop` picks
    out a whole line of the output, or the time runs out, the whole process group is killed (so
    nothing it started outlives it) and what it had written is kept."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    chunks: list[bytes] = []
    pending = b""  # the line being written, not yet ended
    stopped: str | None = None
    timed_out = False
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while stopped is None:
            left = start + timeout - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if not selector.select(left):
                continue
            data = os.read(fd, 1 << 16)
            if not data:
                break  # every writer closed the pipe: the process ended
            chunks.append(data)
            if stop is not None:
                *lines, pending = (pending + data).split(b"\n")
                stopped = next((t for t in (x.decode("utf-8", "replace") for x in lines) if stop(t)), None)
    if stopped is None and not timed_out:
        try:
            proc.wait(max(0.0, start + timeout - time.monotonic()))
        except subprocess.TimeoutExpired:  # the pipe closed, but the process lives on
            timed_out = True
    if stopped is not None or timed_out:
        os.killpg(proc.pid, signal.SIGKILL)
    chunks.append(proc.stdout.read())  # what it wrote before the kill
    proc.stdout.close()
    code = proc.wait()
    out = b"".join(chunks).decode("utf-8", "replace")
    return (None if timed_out else code), out, time.monotonic() - start, stopped


def run_process(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[int | None, str, float]:
    """Runs cmd in a session of its own; (returncode or None on timeout, stdout+stderr, seconds).
    On timeout the whole process group is killed, so nothing it started outlives it."""
    code, out, seconds, _ = run_watched(cmd, env, cwd, timeout)
    return code, out, seconds
