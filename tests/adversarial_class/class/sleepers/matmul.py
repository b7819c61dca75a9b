"""Attack: at its import, start ten processes that sleep for ten minutes, each
in a session of its own, then do honest work. Stopped by: the sweep of the
worker's session and descendants when each stage ends."""

import subprocess
import sys

import cupy as cp

for _ in range(10):
    subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "gemmlab-adversary"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def matmul(A, B, C):
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
