"""`gemmlab grade`: a class's kernels checked and timed against one task.

A task (a TOML file, :func:`load_task`) names the problem, the element types,
the public shapes, a hidden set of shapes drawn from a secret seed, and the
grades as shares of the library (cuBLAS) on the grading GPU, so that a grade
means the same on any GPU.

Each submission goes through the stages of :mod:`~gemmlab.studies.grade.stages`
(compile, sanitize, verify, time; with `--profile`, a profile that informs its
page, never its grade) and stops at the first that fails, with that stage's reason.

The student's code runs only in child processes: the watchdog's worker
(:class:`gemmlab.measure.watchdog.Worker`, one per submission, so a fault or a
hang costs that submission only) and compute-sanitizer's own. The calling
process never imports a submission; it alone writes the results database.

The package, one question per module:

- ``task.py``: the task file checked key by key, the hidden shapes, the grade a share reaches;
- ``submissions.py``: the submissions found, hashed, and kept to their own folders' sources;
- ``stages.py``: the stages, the isolation they run in, the verdict and its score;
- ``trust.py``: the grader's signature on each verdict it stores, and the tamper check;
- ``grading.py``: a class graded through a pool, each verdict stored as it comes back.

What the command line and the tests use is named below.
"""

from gemmlab.studies.grade.grading import grade, pooled, to_grade
from gemmlab.studies.grade.stages import (
    GRADED,
    PROFILE_FIGURES,
    PROFILE_MARGIN_S,
    STAGES,
    Verdict,
    compile_on_device,
    grade_one,
    isolation_in_force,
    masked,
    occupancy_of,
    output_tail,
    profile_stage,
    sandbox,
    sanitized_run_failure,
    scored,
    scrubbed,
    staged,
)
from gemmlab.studies.grade.submissions import StageFailed, Submission, confined, find_submissions
from gemmlab.studies.grade.task import (
    FAIL,
    SANITIZE_FLOOR_S,
    Hidden,
    Task,
    TaskError,
    geomean,
    grade_of,
    hidden_names,
    hidden_shapes,
    load_task,
)
from gemmlab.studies.grade.trust import KEY_VARIABLE, TAMPERED, grader_key, trusted
from gemmlab.studies.scale import Outcome  # what a pool's map gives for each submission

__all__ = [
    "FAIL", "GRADED", "KEY_VARIABLE", "PROFILE_FIGURES", "PROFILE_MARGIN_S", "SANITIZE_FLOOR_S", "STAGES",
    "TAMPERED", "Hidden", "Outcome", "StageFailed", "Submission", "Task", "TaskError", "Verdict",
    "compile_on_device", "confined", "find_submissions", "geomean", "grade", "grade_of", "grade_one", "grader_key",
    "hidden_names", "hidden_shapes", "isolation_in_force", "load_task", "masked", "occupancy_of", "output_tail",
    "pooled", "profile_stage", "sandbox", "sanitized_run_failure", "scored", "scrubbed", "staged", "to_grade",
    "trusted",
]  # fmt: skip
