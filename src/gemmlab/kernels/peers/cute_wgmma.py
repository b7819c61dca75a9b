"""Peer rung cute_wgmma: the tensor ladder's GEMM (C = A.B^T, A M x K and B
N x K in bfloat16, both K-major, C float32) as a Hopper wgmma kernel in the
CuTe DSL: TMA loads into a ring of shared-memory stages guarded by mbarriers,
and the tensor cores fed by warpgroup MMAs straight from shared memory.

The one idea: every fact the CUDA C++ rungs spell by hand (the swizzled
shared layout wgmma wants, the TMA box and its descriptor, the transaction
count each stage's barrier waits for, which accumulator register holds which
element of C) is derived here from the layouts, by CuTe's algebra. What stays
ours is the schedule: one warp issues the loads ``stages`` tiles ahead; every
warpgroup waits for a stage, issues the wgmmas of its four 16-deep k-blocks,
lets the previous tile's wgmmas finish (``wait_group(1)``, so one batch is
always in flight) and only then frees that tile's stage for the next load.

Edges: TMA zero-fills rows and columns past M, N and K, so the mainloop has
no masks; C is written from the accumulators with one predicate per element
(coordinates from an identity tensor), so any M and N work. K must be a
multiple of 8: TMA needs each row of A and B to be whole 16-byte pieces (the
spec's ``k_bytes_multiple``). There is no warp specialisation and no
persistent schedule: the loads and the wgmmas share the warps, as in the
ladder's tc_wgmma.

The FP8 rung (cute_fp8.py) runs this same kernel: its Config has 1-byte
elements, so a k-tile is 128 deep (still one 128-byte row), and ``promote``,
which waits for each tile's wgmmas (``wait_group(0)``), adds their sum into
a second, FP32 accumulator and starts the next tile's sum afresh; its two
scales multiply that sum before C is stored in C's type. Here both are off
and the scales are None: the traced kernel has none of it.

Prediction: near tc_wgmma (whose design it shares) at 4096, below the
persistent CUDA C++ rungs; the direct, per-element store of C costs the
bandwidth of a float32 C written by 4-byte stores. Measured (H100,
2026-11-24, before the runner's hold; benchmarks/results/2026-11-24d_h100_peers.txt):
467.3 TFLOP/s at 4096 against tc_tma_store's 699.7, 587.0 at 8192 against
752.5; its profile puts the loss in the epilogue's global stores
(docs/peer-ladders.md).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from typing import Any

import cuda.bindings.driver as cuda_driver
import cutlass
import cutlass.cute as cute
import cutlass.memory
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.cute.runtime import from_dlpack, make_fake_tensor
from cutlass.tensor_utils import LayoutEnum

WARPGROUP = 128
# One k-tile is one row of the 128-byte swizzle wgmma reads without
# conflicts: 64 bfloat16 elements (four wgmma k-blocks of 16) or 128 e4m3
# ones (four k-blocks of 32).
SWIZZLE_BYTES = 128


@dataclass(frozen=True)
class Config:
    """A named configuration: the tile of C one block computes, the depth of
    the load ring, the bytes of an element of A and B (which set the k-tile)
    and whether each k-tile's sum moves into FP32 registers (``promote``)."""

    tile_m: int
    tile_n: int
    stages: int
    element_bytes: int = 2
    promote: bool = False

    @property
    def tile_k(self) -> int:
        return SWIZZLE_BYTES // self.element_bytes

    @property
    def warpgroups(self) -> int:
        return self.tile_m // 64  # each warpgroup's wgmmas cover 64 rows of C

    @property
    def shared_bytes(self) -> int:
        """The ring of A and B tiles (the mbarriers add 16 bytes a stage)."""
        return self.stages * (self.tile_m + self.tile_n) * self.tile_k * self.element_bytes + self.stages * 16

    @property
    def kwargs(self) -> dict[str, int]:
        return {"tile_m": self.tile_m, "tile_n": self.tile_n, "tile_k": self.tile_k, "stages": self.stages}


# 128 x 128 x 64 in 4 stages is 128 KiB of shared memory; 128 x 256 x 64 in 3 is 144 KiB.
CONFIGS = (Config(128, 128, 4), Config(128, 256, 3))


class WgmmaGemm:
    """The kernel and its host side for one configuration; ``__call__`` is the
    @cute.jit function cute.compile turns into a launchable object."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.tile = (config.tile_m, config.tile_n, config.tile_k)
        self.threads = WARPGROUP * config.warpgroups

    @cute.jit
    def __call__(
        self, a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, scale_a: cute.Tensor | None,
        scale_b: cute.Tensor | None, stream: cuda_driver.CUstream,
    ) -> None:  # fmt: skip
        stages = self.config.stages
        mma = sm90.make_trivial_tiled_mma(
            a.element_type, b.element_type,
            LayoutEnum.from_tensor(a).sm90_mma_major_mode(),
            LayoutEnum.from_tensor(b).sm90_mma_major_mode(),
            cutlass.Float32, (self.config.warpgroups, 1, 1), tiler_mn=(64, self.config.tile_n),
        )  # fmt: skip
        a_smem = sm90.make_smem_layout_a(LayoutEnum.from_tensor(a), self.tile, a.element_type, stages)
        b_smem = sm90.make_smem_layout_b(LayoutEnum.from_tensor(b), self.tile, b.element_type, stages)
        load = cpasync.CopyBulkTensorTileG2SOp()
        tma_a, a_coords = cpasync.make_tiled_tma_atom(
            load, a, cute.slice_(a_smem, (None, None, 0)), (self.tile[0], self.tile[2])
        )
        tma_b, b_coords = cpasync.make_tiled_tma_atom(
            load, b, cute.slice_(b_smem, (None, None, 0)), (self.tile[1], self.tile[2])
        )

        @cute.struct
        class Shared:
            ring: cute.struct.MemRange[cutlass.Int64, stages * 2]  # a full and an empty mbarrier per stage
            sa: cute.struct.Align[cute.struct.MemRange[a.element_type, cute.cosize(a_smem)], 1024]
            sb: cute.struct.Align[cute.struct.MemRange[b.element_type, cute.cosize(b_smem)], 1024]

        self.shared = Shared
        # What each stage's full barrier waits for: one tile of A and one of B (TMA counts zero-filled bytes too).
        a_bytes = cute.size_in_bytes(a.element_type, cute.slice_(a_smem, (None, None, 0)))
        self.stage_bytes = a_bytes + cute.size_in_bytes(b.element_type, cute.slice_(b_smem, (None, None, 0)))
        m, n = cute.size(c, mode=[0]), cute.size(c, mode=[1])
        grid = ((m + self.tile[0] - 1) // self.tile[0], (n + self.tile[1] - 1) // self.tile[1], 1)
        self.kernel(tma_a, a_coords, tma_b, b_coords, c, scale_a, scale_b, mma, a_smem, b_smem).launch(
            grid=grid, block=[self.threads, 1, 1], stream=stream
        )

    @cute.kernel
    def kernel(
        self, tma_a: cute.CopyAtom, a_coords: cute.Tensor, tma_b: cute.CopyAtom, b_coords: cute.Tensor,
        c: cute.Tensor, scale_a: cute.Tensor | None, scale_b: cute.Tensor | None, mma: cute.TiledMma,
        a_smem: cute.ComposedLayout, b_smem: cute.ComposedLayout,
    ) -> None:  # fmt: skip
        stages = self.config.stages
        tidx, _, _ = cute.arch.thread_idx()
        block_m, block_n, _ = cute.arch.block_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp == 0:
            cpasync.prefetch_descriptor(tma_a)
            cpasync.prefetch_descriptor(tma_b)

        storage = cutlass.memory.SmemAllocator().allocate(self.shared)
        ring = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.ring.data_ptr(),
            num_stages=stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            # One arrive per warp frees a stage: every warp's wgmmas read it.
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.threads // 32),
            tx_count=self.stage_bytes,
            cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)),
        )
        sa = storage.sa.get_tensor(a_smem.outer, swizzle=a_smem.inner)
        sb = storage.sb.get_tensor(b_smem.outer, swizzle=b_smem.inner)

        # This block's tiles: (tile_m, tile_k, k-tiles) of A, (tile_n, tile_k, k-tiles) of B, (tile_m, tile_n) of C.
        at = (block_m, block_n, None)
        ga = cute.local_tile(a_coords, self.tile, at, proj=(1, None, 1))
        gb = cute.local_tile(b_coords, self.tile, at, proj=(None, 1, 1))
        gc = cute.local_tile(c, self.tile, at, proj=(1, 1, None))
        where = cute.local_tile(cute.make_identity_tensor(c.shape), self.tile, at, proj=(1, 1, None))
        tma_sa, tma_ga = cpasync.tma_partition(
            tma_a, 0, cute.make_layout(1), cute.group_modes(sa, 0, 2), cute.group_modes(ga, 0, 2)
        )
        tma_sb, tma_gb = cpasync.tma_partition(
            tma_b, 0, cute.make_layout(1), cute.group_modes(sb, 0, 2), cute.group_modes(gb, 0, 2)
        )

        # wgmma reads A and B through shared-memory descriptors, the same for a
        # whole warpgroup: slice by its first thread. C's registers are per thread.
        group_mma = mma.get_slice(cute.arch.make_warp_uniform(tidx // WARPGROUP) * WARPGROUP)
        frag_a = mma.make_fragment_A(group_mma.partition_A(sa))
        frag_b = mma.make_fragment_B(group_mma.partition_B(sb))
        thread_mma = mma.get_slice(tidx)
        c_mine, where_mine = thread_mma.partition_C(gc), thread_mma.partition_C(where)
        acc = cute.make_rmem_tensor(c_mine.shape, cutlass.Float32)

        k_tiles = cute.size(ga, mode=[2])
        k_blocks = cute.size(frag_a, mode=[2])
        loads = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, stages)
        reads = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)
        frees = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, stages)

        if warp == 0:  # fill the ring before the first wgmma
            for _ in cutlass.range(cutlass.min(stages, k_tiles), unroll=1):
                self.load_stage(ring, loads, tma_a, tma_ga, tma_sa, tma_b, tma_gb, tma_sb)
                loads.advance()

        # Promoted, the wgmma accumulator holds one k-tile's sum and ``total`` the FP32 sum of them all.
        total = acc
        if cutlass.const_expr(self.config.promote):
            total = cute.make_rmem_tensor(c_mine.shape, cutlass.Float32)
            total.fill(0.0)
        # wgmma batches still in flight when a stage is freed: promoting needs the tile's sum, so none.
        lag = 0 if self.config.promote else 1

        mma.set(warpgroup.Field.ACCUMULATE, False)
        for k_tile in cutlass.range(k_tiles, unroll=1):
            ring.consumer_wait(reads)
            warpgroup.fence()
            for k_block in cutlass.range(k_blocks, unroll_full=True):
                step = (None, None, k_block, reads.index)
                cute.gemm(mma, acc, frag_a[step], frag_b[step], acc)
                mma.set(warpgroup.Field.ACCUMULATE, True)
            warpgroup.commit_group()
            reads.advance()
            # Unpromoted, the previous tile's wgmmas are done once at most this
            # tile's are in flight: only then may TMA overwrite its stage.
            warpgroup.wait_group(lag)
            if k_tile >= lag:
                ring.consumer_release(frees)
                frees.advance()
                if warp == 0 and loads.count < k_tiles:
                    self.load_stage(ring, loads, tma_a, tma_ga, tma_sa, tma_b, tma_gb, tma_sb)
                    loads.advance()
            if cutlass.const_expr(self.config.promote):
                total.store(total.load() + acc.load())
                # The next tile's first wgmma overwrites the accumulator rather than adding to it: that zeroes it.
                mma.set(warpgroup.Field.ACCUMULATE, False)
        warpgroup.wait_group(0)

        if cutlass.const_expr(scale_a is not None):
            total.store(total.load() * (scale_a[0] * scale_b[0]))
        out = cute.make_rmem_tensor(c_mine.shape, c.element_type)
        out.store(total.load().to(c.element_type))
        # C row by row from the registers; the identity tensor's coordinates
        # keep the stores of an edge tile inside M x N.
        for i in cutlass.range(cute.size(out), unroll_full=True):
            if cute.elem_less(where_mine[i], c.shape):
                c_mine[i] = out[i]

    @cute.jit
    def load_stage(
        self, ring: pipeline.PipelineTmaAsync, loads: pipeline.PipelineState, tma_a: cute.CopyAtom,
        tma_ga: cute.Tensor, tma_sa: cute.Tensor, tma_b: cute.CopyAtom, tma_gb: cute.Tensor, tma_sb: cute.Tensor,
    ) -> None:  # fmt: skip
        """Wait for the stage to be free, then issue its two TMA loads; its full barrier counts their bytes."""
        ring.producer_acquire(loads)
        barrier = ring.producer_get_barrier(loads)
        cute.copy(tma_a, tma_ga[(None, loads.count)], tma_sa[(None, loads.index)], tma_bar_ptr=barrier)
        cute.copy(tma_b, tma_gb[(None, loads.count)], tma_sb[(None, loads.index)], tma_bar_ptr=barrier)
        ring.producer_commit(loads)


def compile_kernel(config: Config, args: tuple[Any, ...], arch: str | None = None) -> Any:
    """cute.compile of one configuration for ``args`` (real or fake tensors and a stream); ``arch`` (sm_90a)
    compiles without asking the driver, and keeps the PTX and the cubin (``__ptx__``, ``__cubin__``). The
    DSL writes them as files too, into the current directory unless told another: a temporary one here."""
    gemm = WgmmaGemm(config)
    if not arch:
        return cute.compile(gemm, *args)
    with tempfile.TemporaryDirectory() as dump:
        return cute.compile(gemm, *args, options=f"--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {dump}")


def fake_matrices(element: type, k_divisibility: int, c_type: type = cutlass.Float32) -> tuple[Any, ...]:
    """Stand-ins of A (M x K), B (N x K) and C (M x N) with symbolic sizes, for compiling with no GPU
    and no torch: rows K-contiguous, K a multiple of ``k_divisibility`` (whole 16-byte rows for TMA)."""
    m, n = cute.sym_int32(symbol="M"), cute.sym_int32(symbol="N")
    k = cute.sym_int32(divisibility=k_divisibility, symbol="K")
    a = make_fake_tensor(element, (m, k), (k, 1), assumed_align=16)
    b = make_fake_tensor(element, (n, k), (k, 1), assumed_align=16)
    c = make_fake_tensor(c_type, (m, n), (n, 1), assumed_align=4)
    return a, b, c


def fake_arguments() -> tuple[Any, ...]:
    """The tensor ladder's arguments as stand-ins: bfloat16 A and B, float32 C, no scales."""
    return (*fake_matrices(cutlass.BFloat16, 8), None, None, cuda_driver.CUstream(0))


def cute_matrix(t: Any, align: int, element: type | None = None) -> Any:
    """A torch matrix as a CuTe tensor (no copy) with its sizes left dynamic, so one compile serves
    every shape; ``element`` names what its bytes hold where DLPack cannot (e4m3 viewed as uint8)."""
    matrix = from_dlpack(t, assumed_align=align)
    if element is not None:
        matrix.element_type = element
    return matrix.mark_layout_dynamic(leading_dim=1)


def current_stream() -> cuda_driver.CUstream:
    """The current torch stream: gemmlab's, which the backend makes current around every launch."""
    import torch

    return cuda_driver.CUstream(torch.cuda.current_stream().cuda_stream)


def runtime_arguments(operands: Any) -> tuple[Any, ...]:
    o = operands
    return cute_matrix(o.a, 16), cute_matrix(o.b, 16), cute_matrix(o.c, 4), None, None, current_stream()


# One compile per configuration and element types for the process: sizes are runtime values.
_COMPILED: dict[tuple[Config, str, str], Any] = {}


def compiled_launch(operands: Any, config: Config, arguments: tuple[Any, ...]):
    """The launch of one configuration with ``arguments`` (made once: converting torch tensors per
    launch would be timed); its first call compiles (the backend times that)."""
    key = (config, str(operands.a.dtype), str(operands.c.dtype))

    def launch() -> None:
        if key not in _COMPILED:
            _COMPILED[key] = compile_kernel(config, arguments)
        _COMPILED[key](*arguments)

    return launch


def launcher(operands: Any, config: Config):
    """The launch of one configuration on the tensor ladder's operands."""
    if not operands.b_kmajor or operands.a.dtype.itemsize != 2:
        raise ValueError("cute_wgmma solves the tensor ladder's problem only: 16-bit A and B, both K-major")
    return compiled_launch(operands, config, runtime_arguments(operands))


def configs(itemsize: int) -> tuple[Config, ...]:
    return CONFIGS
