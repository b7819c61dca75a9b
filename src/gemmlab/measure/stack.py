"""Many input sets renewed and checked at once, for batches of short launches.

A kernel of a few microseconds is timed from a CUDA graph of GRAPH_LAUNCHES
launches, each on an input set of its own, every set renewed before the
replay and checked after it (gemmlab.measure.series). Done set by set that
is some twenty array operations per set and sample, a thousand times the
kernel's own time; here it is a few operations for all the sets together:

- each input is drawn for every set in one call into a stacked array (sets
  one after the other), then copied into the sets' own buffers by one
  launch of a copy kernel that reads a table of addresses;
- the float64 sketch of every set's product (problems/base.py: Sketch) is one
  batched product over the stack;
- the outputs are poisoned (or refilled with C0) by the same copy from a
  stack of poison, and after the launches gathered back by it, their guard
  bands too, and all checked in one batched product and one read to the host.

What a set holds and how it is drawn is the problem's (``Prepared.stack``,
problems/base.py: Stackable); the values are those its own renewal draws.
"""

from __future__ import annotations

import functools
from typing import Any

from gemmlab.problems.base import CANARY, SKETCH_PROBES, Prepared, Stackable, uniform_magnitude

COPY_SOURCE = r"""
// Entry y of the tables: copy `bytes` bytes from src[y] to dst[y], 16 bytes a
// thread where every address and the length allow it, else byte by byte.
extern "C" __global__ void gemmlab_copy_table(const unsigned long long *dst, const unsigned long long *src,
                                              unsigned long long bytes)
{
    char *d = (char *)dst[blockIdx.y];
    const char *s = (const char *)src[blockIdx.y];
    unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    if ((((unsigned long long)d | (unsigned long long)s | bytes) & 15) == 0) {
        uint4 *d4 = (uint4 *)d;
        const uint4 *s4 = (const uint4 *)s;
        for (unsigned long long i = first; i < bytes / 16; i += stride) d4[i] = s4[i];
    } else {
        for (unsigned long long i = first; i < bytes; i += stride) d[i] = s[i];
    }
}
"""
THREADS = 256
MAX_BLOCKS = 1024


@functools.cache
def _copier(cp: Any) -> Any:
    return cp.RawKernel(COPY_SOURCE, "gemmlab_copy_table")


class _Table:
    """Copies between one buffer per set and the slices of a stack."""

    def __init__(self, cp: Any, buffers: list[Any], stack: Any) -> None:
        self.cp, self.stack = cp, stack
        self.bytes = buffers[0].nbytes
        step = stack.strides[0]
        self.sets = cp.asarray([b.data.ptr for b in buffers], dtype=cp.uint64)
        self.slices = cp.asarray([stack.data.ptr + i * step for i in range(len(buffers))], dtype=cp.uint64)

    def scatter(self) -> None:
        """The stack's slices into the sets' buffers."""
        self._copy(self.sets, self.slices)

    def gather(self) -> None:
        """The sets' buffers into the stack's slices."""
        self._copy(self.slices, self.sets)

    def _copy(self, dst: Any, src: Any) -> None:
        blocks = min(MAX_BLOCKS, max(1, -(-self.bytes // (16 * THREADS))))
        _copier(self.cp)((blocks, len(dst)), (THREADS,), (dst, src, self.cp.uint64(self.bytes)))


class Stacked:
    """The sets of ``prepared`` (all of one problem and point), renewed and
    checked together; ``rng`` draws their inputs and probes."""

    def __init__(self, cp: Any, prepared: list[Prepared], rng: Any) -> None:
        specs: list[Stackable] = [p.stack for p in prepared]  # type: ignore[misc]
        self.cp, self.rng, self.spec, self.count = cp, rng, specs[0], len(specs)
        first = specs[0]
        self.inputs = {"a": first.a, "b": first.b, **({"c0": first.c0} if first.c0 is not None else {})}
        self.tables = {
            name: _Table(cp, [getattr(s, name).array for s in specs], cp.empty((self.count, *op.array.shape),
                                                                               dtype=op.array.dtype))
            for name, op in self.inputs.items()
        }  # fmt: skip
        self.out = _Table(cp, [s.out for s in specs], cp.empty((self.count, *first.out.shape), dtype=first.out.dtype))
        poison = cp.empty_like(self.out.stack)
        first.poison(cp, poison)
        self.poisoned = _Table(cp, [s.out for s in specs], poison)
        guards = [p.guards[0] for p in prepared]
        self.band_bytes = guards[0].band * guards[0].whole.itemsize
        if self.band_bytes:
            edges = [g.whole[: g.band] for g in guards] + [g.whole[-g.band :] for g in guards]
            self.bands = _Table(cp, edges, cp.empty((len(edges), self.band_bytes), dtype=cp.uint8))
        self.probes: Any = None
        self.expected: Any = None
        self.floor: Any = 0.0

    def renew(self, poison: bool) -> None:
        """New inputs in every set, their sketches, and the outputs poisoned
        (``poison``) or, where C is also an input, refilled with C0."""
        cp, spec = self.cp, self.spec
        for name, op in self.inputs.items():
            self.tables[name].stack[...] = op.draw(cp, self.rng, self.count)
        a64 = spec.a.exact(cp, self.tables["a"].stack)
        b64 = spec.b.exact(cp, self.tables["b"].stack)
        n = b64.shape[1] if spec.b_transposed else b64.shape[2]
        if spec.exact:
            x = self.rng.integers(-1, 2, size=(self.count, n, SKETCH_PROBES), dtype=cp.int32).astype(cp.float64)
        else:
            x = self.rng.standard_normal(size=(self.count, n, SKETCH_PROBES), dtype=cp.float64)
        bx = cp.matmul(b64.transpose(0, 2, 1), x) if spec.b_transposed else cp.matmul(b64, x)
        y = cp.matmul(a64, bx)
        if spec.alpha != 1.0:
            y *= spec.alpha
        c064 = spec.c0.exact(cp, self.tables["c0"].stack) if spec.c0 is not None else None
        if c064 is not None and spec.beta:
            y += spec.beta * cp.matmul(c064, x)
        self.probes, self.expected = x, y
        if not spec.exact:  # the floor under a C that cancels, as a single set's renewal takes it
            m, k = a64.shape[1:]
            self.floor = uniform_magnitude(m, n, k, spec.alpha, spec.beta if c064 is not None else 0.0)
            self.floor *= SKETCH_PROBES**0.5
        if poison:  # the kernel's sets; the library writes outputs of its own
            self._prime() if spec.primed else self.poisoned.scatter()
        # The inputs go into the sets last, after the float64 work above: as a
        # set renewed alone, they are then warm in L2 as far as it holds them.
        for table in self.tables.values():
            table.scatter()

    def _prime(self) -> None:
        """Every set's C refilled with its C0, as its own poison() would."""
        self.out.stack[...] = self.tables["c0"].stack
        self.out.scatter()

    def errors(self) -> list[float]:
        """Each set's relative error through its probes (NaN where poison is left)."""
        cp, spec = self.cp, self.spec
        self.out.gather()
        seen = cp.matmul(spec.out_values(cp, self.out.stack).astype(cp.float64), self.probes)
        diff = seen - self.expected
        if spec.exact:
            wrong = (diff != 0).any(axis=(1, 2)) | cp.isnan(diff).any(axis=(1, 2))
            return [1.0 if w else 0.0 for w in wrong.get().tolist()]
        norm = cp.sqrt((diff * diff).sum(axis=(1, 2)))
        scale = cp.maximum(cp.sqrt((self.expected * self.expected).sum(axis=(1, 2))), self.floor)
        return (norm / scale).get().tolist()

    def damaged(self) -> list[bool]:
        """Whether anything was written into each set's guard bands."""
        if not self.band_bytes:
            return [False] * self.count
        self.bands.gather()
        hit = (self.bands.stack != CANARY).any(axis=1).get().tolist()
        return [hit[i] or hit[self.count + i] for i in range(self.count)]
