"""Attack: leave files in the HOME and the temporary folder it is given, and
a setting for the next submission in the shell's startup file there. Stopped
by: the HOME and temporary folder are made for the submission and removed
after it."""

import os
import tempfile

import cupy as cp

for _folder in (os.path.expanduser("~"), tempfile.gettempdir()):
    with open(os.path.join(_folder, "gemmlab-adversary-planted"), "w") as _f:
        _f.write("planted\n")
with open(os.path.expanduser("~/.bashrc"), "a") as _f:
    _f.write("export GEMMLAB_ADVERSARY=planted\n")


def matmul(A, B, C):
    cp.matmul(A, B, out=C)


GEMMLAB = {"function": "matmul", "problem": "matmul", "dtypes": ["float32"], "arrays": "cupy"}
