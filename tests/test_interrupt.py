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
import sys, time
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


@pytest.mark.xfail(strict=False, reason=(
    "known bug of this round, open: in a fresh-clone CI run (2 loaded cores, full checks) the child answers the "
    "SIGINT but does not exit within 10 s (the op after the abandoned launch seems to hang); it passes when run "
    "alone. Tracked in the round's closing note"))
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
        out, err = child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "interrupted after" in out, (out, err)
    assert took < 1.0, f"the child took {took:.2f} s to stop"
    assert "next 3.0" in out, (out, err)
    assert child.returncode == 0, (out, err)
