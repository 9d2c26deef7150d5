"""The child process of tests/test_fuzz.py: runs a list of calls, one by one,
and reports how each one ended.

Reads a JSON list of Python expressions (each one call of the public API
with hostile arguments, in the names ``mt``, ``np``, ``F``, ``K``, ``math``)
from the file named by argv[1], and appends one JSON line per event to the
file named by argv[2]: ``{"i": n, "start": expr}`` before call n (flushed,
so that the parent can name the call that killed the process), then
``{"i": n, "end": kind, "type": ..., "message": ..., "output": ...}`` where
kind is "ok" or "raised", and output is whatever the call wrote to the
process's stdout or stderr (file descriptors 1 and 2, so that output of the
C library is caught too). Python warnings are recorded, not printed.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import warnings

import numpy as np

import minitensor as mt
import minitensor.kernels as K
import minitensor.nn.functional as F


# The clean ways for a call to fail (a minitensor error is a RuntimeError;
# BufferError is how DLPack's __dlpack__ refuses an export).
ALLOWED = (mt.MinitensorError, TypeError, ValueError, IndexError, RuntimeError, BufferError)


def main() -> None:
    calls = json.loads(open(sys.argv[1]).read())
    report = open(sys.argv[2], "a", buffering=1)
    capture = tempfile.TemporaryFile()
    saved = os.dup(1), os.dup(2)
    namespace = {"mt": mt, "np": np, "F": F, "K": K, "math": math}
    mt.ones(2).sum().item()  # start the engine before capturing
    for i, expr in enumerate(calls):
        report.write(json.dumps({"i": i, "start": expr}) + "\n")
        report.flush()
        os.fsync(report.fileno())
        sys.stdout.flush()
        sys.stderr.flush()
        capture.seek(0)
        capture.truncate()
        os.dup2(capture.fileno(), 1)
        os.dup2(capture.fileno(), 2)
        kind, etype, message, allowed = "ok", "", "", True
        try:
            with warnings.catch_warnings(record=True):
                warnings.simplefilter("always")
                result = eval(expr, dict(namespace))  # noqa: S307 - the test's own expressions
                if isinstance(result, mt.Tensor) and result.numel() < 10_000:
                    result.numpy()  # reading the result back must work too
        except BaseException as e:  # noqa: BLE001 - every outcome is reported
            kind, etype, message = "raised", f"{type(e).__module__}.{type(e).__qualname__}", str(e)
            allowed = isinstance(e, ALLOWED) and not isinstance(e, RecursionError)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        capture.seek(0)
        output = capture.read().decode(errors="replace")
        report.write(json.dumps({"i": i, "end": kind, "type": etype, "message": message[:500], "allowed": allowed,
                                 "output": output[:500]}) + "\n")
    report.write(json.dumps({"done": len(calls)}) + "\n")


if __name__ == "__main__":
    main()
