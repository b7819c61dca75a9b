"""The timed series (gemmlab.measure.series) on a GPU made of Python
(tests/series_fakes.py): every sample renewed, poisoned, checked; the cheats
of the adversarial corpus reduced to their logic, each caught by the check
its entry names; what CUPTI's records make of lingering and foreign work."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

import series_fakes as fakes
from gemmlab.core.errors import GemmlabError, VerificationError
from gemmlab.core.timing import ratio_interval, within_noise
from gemmlab.measure import activity, series
from gemmlab.measure.activity import CALL, END, LIBRARY, START, tag

POINT = SimpleNamespace(spec=SimpleNamespace(id="k", declaration="k.toml"), shape="64x64x64", block_edge=0,
                        dtype="float32")  # fmt: skip


def _series(gpu: fakes.FakeGPU, kernel, *, sets: int = 8, recorder=None, flush=None):
    made = [fakes.FakeSet(gpu, i) for i in range(sets)]
    bound = [series.InputSet(s.prepared(), lambda s=s: kernel(s)) for s in made]
    supply = iter(bound[1:])
    pool = series.Pool(gpu, bound[0], lambda: next(supply), set_bytes=1, point=POINT, tolerance=1e-5)
    pool.budget = len(bound) - 1
    run = series.Series(gpu, gpu, pool, recorder or activity.Recorder.__new__(_Off), flush=flush)
    kernel_side = series.Side(CALL, lambda i: pool.sets[i].launch(), checked=True)
    library_side = series.Side(LIBRARY, lambda i: pool.sets[i].prepared.baseline(), checked=False)
    return run, kernel_side, library_side, made


class _Off(activity.Recorder):
    """CUPTI absent: the events alone."""

    available = False
    reason = "not in this test"


def test_every_sample_is_renewed_poisoned_and_checked_outside_the_events() -> None:
    gpu = fakes.FakeGPU()
    run, kernel, library, _ = _series(gpu, fakes.honest(1.0))
    out = series.timed(run, kernel, library, reps=4, max_seconds=10)
    assert [s.ms for s in out.kernel] == [1.0] * 4 and [s.ms for s in out.library] == [1.0] * 4
    # Each kernel sample: its set renewed and poisoned, the hold, then the events
    # around the launch alone, the device synchronised after; the library's set
    # renewed too (the same state of L2), never poisoned.
    samples = " ".join(gpu.log).split(" sync")
    kernel_samples = [x.split() for x in samples if "honest" in x]
    library_samples = [x.split() for x in samples if "library" in x]
    assert len(kernel_samples) == len(library_samples) == 4
    for words in kernel_samples:
        assert words[0] == "renew" and words[2] == "poison" and words[4:] == ["hold", "event", "honest", "event"]
    for words in library_samples:
        assert words[0] == "renew" and words[2:] == ["hold", "event", "library", "event"]
    assert out.method.startswith("CUDA events only")


def test_kernel_and_library_alternate_each_round_in_the_opposite_order() -> None:
    gpu = fakes.FakeGPU()
    run, kernel, library, _ = _series(gpu, fakes.honest(1.0))
    series.timed(run, kernel, library, reps=5, max_seconds=10)
    order = [name for name in gpu.log if name in ("honest", "library")]
    assert order == ["honest", "library", "library", "honest", "honest", "library", "library", "honest", "honest",
                     "library"]  # fmt: skip


def test_a_kernel_that_works_only_when_its_output_is_poisoned_is_timed_doing_the_work() -> None:
    """Corpus: poison sniffing. Every timed launch starts from the poison, so
    the sniffer cannot tell a timed launch from a checked one."""
    gpu = fakes.FakeGPU()
    run, kernel, library, _ = _series(gpu, fakes.poison_sniffing(2.0))
    out = series.timed(run, kernel, library, reps=6, max_seconds=10)
    assert [s.ms for s in out.kernel] == [2.0] * 6


def test_a_kernel_that_hands_back_a_kept_answer_fails_on_the_renewed_inputs() -> None:
    """Corpus: memoisation on the output's buffer (or its pointer)."""
    gpu = fakes.FakeGPU()
    run, kernel, library, _ = _series(gpu, fakes.memoising(2.0), sets=2)
    with pytest.raises(VerificationError, match="on timed sample"):
        series.timed(run, kernel, library, reps=10, max_seconds=10)


def test_a_kernel_that_counts_its_launches_fails_on_the_first_it_skips() -> None:
    """Corpus: launch counting (honest for the warm-up and the first checks only)."""
    gpu = fakes.FakeGPU()
    run, kernel, library, _ = _series(gpu, fakes.launch_counting(2.0, honest_launches=3))
    with pytest.raises(VerificationError, match="on timed sample 4"):
        series.timed(run, kernel, library, reps=10, max_seconds=10)


def test_a_short_kernel_is_timed_from_graphs_each_launch_on_a_set_of_its_own() -> None:
    gpu = fakes.FakeGPU()
    run, kernel, library, made = _series(gpu, fakes.honest(0.004), sets=series.GRAPH_LAUNCHES)
    out = series.timed(run, kernel, library, reps=3, max_seconds=10)
    assert out.kernel_batch is not None and out.kernel_batch.graphed and out.kernel_batch.count == 50
    assert [round(s.ms, 6) for s in out.kernel] == [0.004] * 3 and len(out.library) == 3
    assert out.input_sets == 50
    # Every set was renewed before every replay of the graph, and each launch checked.
    replays = gpu.log.count("graph(50)")
    assert replays == 6 and all(s.renewals >= replays for s in made)


def test_a_batch_of_short_launches_catches_a_launch_counter_too() -> None:
    gpu = fakes.FakeGPU()
    run, kernel, library, _ = _series(gpu, fakes.launch_counting(0.004, honest_launches=60),
                                      sets=series.GRAPH_LAUNCHES)  # fmt: skip
    with pytest.raises(VerificationError, match="launch 10 of its batch"):
        series.timed(run, kernel, library, reps=3, max_seconds=10)


def test_with_an_l2_flush_a_short_problem_keeps_single_launches() -> None:
    gpu = fakes.FakeGPU()
    flushes = []
    run, kernel, library, _ = _series(gpu, fakes.honest(0.004), flush=lambda: flushes.append(1))
    out = series.timed(run, kernel, library, reps=3, max_seconds=10)
    assert out.kernel_batch is None and len(flushes) == 6


def test_a_sample_draws_from_the_pool_at_random() -> None:
    gpu = fakes.FakeGPU()
    run, kernel, library, made = _series(gpu, fakes.honest(1.0))
    series.timed(run, kernel, library, reps=30, max_seconds=100)
    used = {s.number for s in made if s.renewals}
    assert used == set(range(series.SINGLE_SETS))


def test_work_left_running_on_a_side_stream_counts_in_the_time() -> None:
    """Corpus: lingering GPU work. CUPTI sees the side kernel end after the
    end event; the sample is lengthened to its end and the names are kept."""
    gpu = fakes.FakeGPU()
    recorder = fakes.FakeRecorder(gpu)
    run, kernel, library, _ = _series(gpu, fakes.lingering(1.0, left_ms=3.0), recorder=recorder)
    out = series.timed(run, kernel, library, reps=3, max_seconds=10)
    assert [round(s.ms, 6) for s in out.kernel] == [4.0] * 3  # 1 ms on the stream, then 3 more on the side one
    assert set(out.lingering) == {"side"} and {"main", "side"} <= set(out.names)


def _window_trace(*windows: tuple[int, int, int, int]) -> activity.Trace:
    """A trace with the START and END events of (role, sample, start, end) windows."""
    trace = activity.Trace()
    ids = iter(range(1, 100))
    for _role, sample, start, end in windows:
        for role, at in ((START, start), (END, end)):
            c = next(ids)
            trace.external[c], trace.events[c] = tag(role, sample), at
    return trace


def test_untagged_work_inside_the_librarys_window_is_refused() -> None:
    """Corpus: a background thread. Work that carries no tag of the window it
    runs in is not the runner's (which renews before the hold and checks after
    the window): inside the library's window it would slow the library, so the
    series is refused."""
    trace = _window_trace((CALL, 0, 0, 100), (LIBRARY, 1, 200, 300))
    trace.activities.append(activity.Activity("kernel", "spin", 150, 280, 0, 50))  # launched before the window
    works = activity.judge(trace, [(CALL, 0), (LIBRARY, 1)])
    assert works[1].foreign == ["spin"] and works[0].names == []
    gpu = fakes.FakeGPU()
    run, *_ = _series(gpu, fakes.honest(1.0), recorder=SimpleNamespace(available=True, flushed=lambda: trace))
    run.ids = [(CALL, 0), (LIBRARY, 1)]
    with pytest.raises(GemmlabError, match="not idle while the library was timed: spin"):
        run.settle()


def test_untagged_work_inside_the_kernels_window_is_the_kernels() -> None:
    trace = _window_trace((CALL, 0, 0, 100))
    trace.activities.append(activity.Activity("kernel", "helper", 50, 10_100, 0, 3))
    (work,) = activity.judge(trace, [(CALL, 0)])
    assert work.names == ["helper"] and work.lingering == ["helper"] and work.extra_ns == 10_000


def test_the_calls_work_started_before_the_start_event_counts_too() -> None:
    """Work the call put on another stream can start while the runner's hold
    still keeps the timed stream busy, before the start event: it counts from
    its own start."""
    trace = _window_trace((CALL, 0, 300_000, 310_000))
    trace.external[7] = tag(CALL, 0)
    trace.activities.append(activity.Activity("kernel", "early", 20_000, 370_000, 0, 7))
    (work,) = activity.judge(trace, [(CALL, 0)])
    assert work.lingering == ["early"] and work.extra_ns == 280_000 + 60_000


def test_the_ratio_carries_an_interval_and_says_when_it_is_noise() -> None:
    steady = ratio_interval([1.0, 1.01, 0.99, 1.0, 1.02, 0.98], [2.0, 2.02, 1.98, 2.0, 2.01, 1.99])
    assert steady is not None and 1.9 < steady[0] <= 2.0 <= steady[1] < 2.1 and not within_noise(steady)
    noisy = ratio_interval([1.0, 1.3, 0.8, 1.1, 0.9, 1.2], [1.1, 0.9, 1.2, 0.8, 1.0, 1.3])
    assert within_noise(noisy)
    assert ratio_interval([1.0, 1.0], [2.0, 2.0]) is None
    assert math.isfinite(steady[1])


def test_a_library_that_refuses_capture_is_timed_from_launches_back_to_back_and_says_so() -> None:
    from gemmlab.measure.run import _timing_of, timing_warnings

    gpu = fakes.FakeGPU()
    run, kernel, library, _ = _series(gpu, fakes.honest(0.005), sets=series.GRAPH_LAUNCHES)

    def refusing(i: int) -> None:
        if gpu.capturing:
            raise RuntimeError("operation not permitted when stream is capturing")
        run.pool.sets[i].prepared.baseline()

    library.call = refusing
    out = series.timed(run, kernel, library, reps=4, max_seconds=10)
    timing, base = _timing_of(out.kernel, out.kernel_batch), _timing_of(out.library, out.library_batch)
    assert timing.method == f"CUDA graph of {series.GRAPH_LAUNCHES} launches"
    assert base.method == f"{series.GRAPH_LAUNCHES} back-to-back launches"
    assert timing.reps == base.reps == 4 and timing.median_ms == pytest.approx(0.005)
    assert any("back to back" in w for w in timing_warnings(base))
    assert any("each on an input set of its own" in w for w in timing_warnings(timing))


def test_the_adversarial_corpus_names_a_check_for_every_entry() -> None:
    """Issue 48 asks for at least 20 entries (tests/adversarial), each naming
    the check that catches it; tests/test_gpu_adversarial.py runs them."""
    from pathlib import Path

    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    corpus = Path(__file__).resolve().parent / "adversarial"
    entries = tomllib.loads((corpus / "corpus.toml").read_text())["entry"]
    assert len([e for e in entries if "honest" not in e["name"]]) >= 20
    kinds = {"refused", "honest", "counted", "named", "refused_or_honest"}
    for entry in entries:
        assert entry["check"] and entry["expect"] in kinds and entry["run"] in ("runner", "graded"), entry
        folder = corpus / entry["name"]
        assert (folder / "matmul.toml").is_file() or (folder / "matmul.py").is_file(), folder
        if entry["expect"] != "named" and entry["expect"] != "honest":
            assert entry.get("words"), entry


def test_a_window_is_read_off_the_hold_and_the_marker_where_events_give_no_time() -> None:
    """The hold ends as the start event is reached; the marker kernel launched
    behind the end event starts as it is reached (both tagged with the sample)."""
    trace = activity.Trace()
    trace.external.update({1: tag(START, 0), 2: tag(END, 0), 3: tag(CALL, 0)})
    trace.activities += [
        activity.Activity("kernel", "gemmlab_hold", 0, 300_000, 0, 1),
        activity.Activity("kernel", "matmul", 301_000, 400_000, 0, 3),
        activity.Activity("kernel", "gemmlab_hold", 401_000, 402_000, 0, 2),
        activity.Activity("kernel", "side", 310_000, 900_000, 0, 3),
    ]
    (work,) = activity.judge(trace, [(CALL, 0)])
    assert (work.start, work.end) == (300_000, 401_000)
    assert work.names == ["matmul", "side"] and work.lingering == ["side"] and work.extra_ns == 499_000


def test_work_outside_the_events_counts_before_the_choice_of_graphs() -> None:
    """A call that puts all its work on a stream of its own looks, between
    the events, like a kernel of a microsecond; its work, counted, is what
    decides whether it is short enough for a graph."""
    gpu = fakes.FakeGPU()
    recorder = fakes.FakeRecorder(gpu)
    run, kernel, library, _ = _series(gpu, fakes.lingering(0.0001, left_ms=0.5), recorder=recorder)
    out = series.timed(run, kernel, library, reps=3, max_seconds=10)
    assert out.kernel_batch is None and all(s.ms >= 0.5 for s in out.kernel)


def test_a_round_slowed_by_heat_is_taken_again_and_a_power_capped_one_only_counted(monkeypatch) -> None:
    from gemmlab.core import gpu as gpu_module

    reasons = iter([[], [], [], [], ["hardware thermal slowdown"], [], ["software power cap"], []] + [[]] * 20)
    monkeypatch.setattr(gpu_module, "clock_slowdown_reasons", lambda index=0: next(reasons))
    gpu = fakes.FakeGPU()
    run, kernel, library, _ = _series(gpu, fakes.honest(1.0))
    out = series.timed(run, kernel, library, reps=4, max_seconds=10)
    # Rounds: probes (samples 1-2), then 3 alternated rounds; the first of them had a thermal
    # slowdown and is taken again once, clean; the power-capped round stays, flagged.
    assert out.retaken == 1 and len(out.kernel) == len(out.library) == 4
    assert sum(1 for s in out.kernel + out.library if s.slowed) == 1


class _FakeNvml:
    """pynvml's process queries, answering with the pids given."""

    def __init__(self, compute: list[int], graphics: list[int] = ()) -> None:
        from types import SimpleNamespace

        self.nvmlDeviceGetComputeRunningProcesses = lambda handle: [SimpleNamespace(pid=p) for p in compute]
        self.nvmlDeviceGetGraphicsRunningProcesses = lambda handle: [SimpleNamespace(pid=p) for p in graphics]


def _with_nvml(monkeypatch, fake: _FakeNvml) -> None:
    import sys

    from gemmlab.core import gpu

    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(gpu, "_nvml_handle", lambda index: object())


def test_another_process_on_the_gpu_is_named_and_this_ones_family_is_not(monkeypatch) -> None:
    """Issue 48: CUPTI sees this process's work only; NVML names the other
    processes with a context on the GPU, so a timing they could share says so.
    This process, its parent and its children are not others."""
    import os
    import subprocess

    from gemmlab.core import gpu
    from gemmlab.measure.run import other_process_warnings

    child = subprocess.Popen(["sleep", "30"])
    own_session = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        family = [os.getpid(), os.getppid(), child.pid]
        _with_nvml(monkeypatch, _FakeNvml(family, [own_session.pid]))
        # A child in a session of its own is still this process's own work.
        assert gpu.other_processes(0) == []
        _with_nvml(monkeypatch, _FakeNvml([os.getpid(), 999_999_999]))
        others = gpu.other_processes(0)
        assert others == [(999_999_999, "?")]
        (said,) = other_process_warnings(others)
        assert "pid 999999999" in said and "CUPTI" in said
    finally:
        child.kill()
        own_session.kill()


def test_nvml_that_cannot_tell_gives_no_warning(monkeypatch) -> None:
    """A list without this process (a container's NVML reports the host's pids)
    or no NVML at all: nothing can be told, and nothing is claimed."""
    from gemmlab.core import gpu
    from gemmlab.measure.run import other_process_warnings

    _with_nvml(monkeypatch, _FakeNvml([12345, 67890]))
    assert gpu.other_processes(0) is None
    monkeypatch.setattr(gpu, "_nvml_handle", lambda index: None)
    assert gpu.other_processes(0) is None and other_process_warnings(None) == []
