"""The backend registry: every kernel id has one backend, and the sweep asks it, not the id."""

from __future__ import annotations

import pytest

from gemmlab import backends
from gemmlab.backends import cpu, nvrtc, peers
from gemmlab.backends.base import Backend, DeviceBackend, HostBackend
from gemmlab.core.errors import UnknownName
from gemmlab.core.shapes import Shape
from gemmlab.kernels import catalogue
from gemmlab.studies import points, sweep


def test_every_catalogue_kernel_is_nvrtcs_and_every_baseline_the_cpus() -> None:
    for kernel_id in catalogue.kernel_ids():
        assert backends.for_kernel(kernel_id) is nvrtc.BACKEND, kernel_id
        assert not backends.on_host(kernel_id)
    for kernel_id in ("cpu_naive", "cpu_blocked", "cpu_blas"):
        assert backends.for_kernel(kernel_id) is cpu.BACKEND
        assert backends.on_host(kernel_id)
    assert (backends.NVRTC, backends.CPU, backends.PYTHON, backends.PEERS) == ("nvrtc", "cpu", "python", "peers")
    assert [b.name for b in backends.BACKENDS] == [backends.NVRTC, backends.CPU, backends.PYTHON, backends.PEERS]


def test_each_backend_offers_its_kind_of_interface() -> None:
    assert isinstance(nvrtc.BACKEND, DeviceBackend) and not isinstance(nvrtc.BACKEND, HostBackend)
    assert isinstance(cpu.BACKEND, HostBackend) and not isinstance(cpu.BACKEND, DeviceBackend)
    assert isinstance(peers.BACKEND, DeviceBackend) and not isinstance(peers.BACKEND, HostBackend)


def test_an_unknown_kernel_names_its_neighbours_and_the_baselines() -> None:
    with pytest.raises(UnknownName, match="tiledd") as found:
        backends.for_kernel("tiledd")
    assert "tiled" in found.value.fix and "cpu_naive" in found.value.fix
    assert not backends.on_host("tiledd")  # a stored row of a kernel since renamed: a GPU kernel, as before


class _Recording:
    """A backend serving one made-up kernel, recording what it is asked."""

    def __init__(self, name: str, on_host: bool) -> None:
        self.name, self.on_host, self.asked = name, on_host, []

    def kernel_ids(self) -> tuple[str, ...]:
        return (f"{self.name}_kernel",)

    def dtypes(self, kernel_id: str) -> tuple[str, ...]:
        self.asked.append("dtypes")
        return ("int32", "float32")

    def block_edges(self, kernel_id: str) -> tuple[int, ...]:
        self.asked.append("block_edges")
        return (8, 16)

    def violations(self, kernel_id: str, shape: Shape, block_edge: int, dtype: str) -> list[str]:
        self.asked.append("violations")
        return ["edge 8 is too small"] if block_edge == 8 else []

    def predicted_ms(self, kernel_id: str, shape: Shape, block_edge: int) -> float:
        self.asked.append("predicted_ms")
        return 1e6  # slow: few repetitions

    def analytic_cgma(self, kernel_id: str, shape: Shape, block_edge: int) -> float | None:
        return 3.0


class _RecordingHost(_Recording):
    """The same, measuring on the host as a HostBackend does."""

    def measure(
        self, kernel_id: str, shape: Shape, dtype: str, *, reps: int, max_seconds: float, seed: int | None = None
    ) -> dict:
        self.asked.append("measure")
        return {"kernel": kernel_id}


@pytest.mark.parametrize("host", [True, False], ids=["host", "device"])
def test_sweep_plans_and_runs_through_the_backend(monkeypatch: pytest.MonkeyPatch, host: bool) -> None:
    fake = _RecordingHost("fakehost", True) if host else _Recording("fakegpu", False)
    kernel = fake.kernel_ids()[0]
    assert isinstance(fake, Backend)
    monkeypatch.setitem(backends._BY_KERNEL, kernel, fake)
    planned, refused = points.plan([kernel], [Shape.square(64)])
    assert [(p.block_edge, p.dtype, p.reps) for p in planned] == [(16, "int32", points.SLOW_REPS)]
    assert refused == [(f"{kernel} 64 b8 int32", "edge 8 is too small")]
    assert {"dtypes", "block_edges", "violations", "predicted_ms"} <= set(fake.asked)
    assert backends.on_host(kernel) is host
    if host:
        assert sweep.measure_point(kernel, Shape.square(64), 16, "int32") == {"kernel": kernel}
        assert fake.asked[-1] == "measure"
    else:  # a GPU kernel goes to gemmlab's runner, not to a measure of its backend's
        ran = []
        monkeypatch.setattr("gemmlab.measure.run.run", lambda *args, **kwargs: ran.append(args) or "timed")
        assert sweep.measure_point(kernel, Shape.square(64), 16, "int32") == "timed"
        assert ran == [(kernel, Shape.square(64), 16, "int32")] and "measure" not in fake.asked


def test_the_runner_refuses_a_host_kernel_before_touching_the_gpu() -> None:
    from gemmlab.measure.run import run

    with pytest.raises(UnknownName, match="runs on the host"):
        run("cpu_naive", Shape.square(64))


def test_a_bound_kernel_refuses_as_the_runner_does_before_any_allocation() -> None:
    """measure.run.bound (clock_watch.py's binding) checks the point as run()
    does: a host kernel is refused by name, and a shape the kernel cannot take
    by its rule, both before the GPU is touched."""
    from gemmlab.core.errors import ConstraintError
    from gemmlab.measure.run import bound

    with pytest.raises(UnknownName, match="runs on the host"), bound("cpu_naive", Shape.square(64)):
        pass
    with pytest.raises(ConstraintError, match="multiple of 8"), bound("tc_tma_store", Shape(64, 64, 60), "bfloat16"):
        pass


class _Occupancy:
    """The driver's occupancy answers, as a loaded kernel gives them (stubbed: no GPU)."""

    def __init__(self, per_sm: int, clusters: int) -> None:
        self.per_sm, self.clusters, self.asked = per_sm, clusters, []

    def max_active_blocks_per_multiprocessor(self, threads: int, smem: int) -> int:
        self.asked.append(("blocks", threads, smem))
        return self.per_sm

    def max_active_clusters(self, config: object, stream: object) -> int:
        self.asked.append(("clusters", config, stream))
        return self.clusters


def test_blocks_at_once_counts_whole_clusters_and_resident_grid_caps_at_it(monkeypatch) -> None:
    """blocks_at_once: SMs x blocks per SM without clusters, resident clusters x
    their size with them; resident_grid launches no more than that and refuses
    a point of which not one block fits."""
    from types import SimpleNamespace

    from gemmlab.core.errors import DeviceLimitError

    monkeypatch.setattr(nvrtc.launch, "launch_config", lambda point, grid: ("config", grid))
    info = SimpleNamespace(sm_count=132, name="a stubbed GPU")
    plain = catalogue.point("tc_persistent", Shape.square(4096), None, "bfloat16")
    kernel = SimpleNamespace(occupancy=_Occupancy(per_sm=1, clusters=0))
    assert nvrtc.blocks_at_once(kernel, plain, info, "stream") == 132
    assert kernel.occupancy.asked[0][0] == "blocks"
    assert nvrtc.resident_grid(kernel, plain, info, "stream") == (132, *plain.grid[1:])

    spec = catalogue.variant("tc_small", {"BN": 64, "SPLITS": 4})
    split = catalogue.point(spec.id, Shape(128, 4096, 4096), None, "bfloat16", spec=spec)
    kernel = SimpleNamespace(occupancy=_Occupancy(per_sm=2, clusters=30))
    assert spec.cluster == (4, 1, 1)
    assert nvrtc.blocks_at_once(kernel, split, info, "stream") == 120
    assert kernel.occupancy.asked == [("clusters", ("config", split.grid), "stream")]

    none_fit = SimpleNamespace(occupancy=_Occupancy(per_sm=0, clusters=0))
    assert nvrtc.blocks_at_once(none_fit, plain, info, "stream") == 0
    with pytest.raises(DeviceLimitError, match="fits no blocks on a stubbed GPU"):
        nvrtc.resident_grid(none_fit, plain, info, "stream")
    with pytest.raises(DeviceLimitError, match="fits no clustered blocks"):
        nvrtc.resident_grid(none_fit, split, info, "stream")
