"""cuBLASLt's FP8 product by itself, for Nsight Compute: torch._scaled_mm on
N x N e4m3 operands with per-tensor scales (A . B^T, as the lowp ladder's
baseline calls it), three times. Usage, on a GPU machine with PyTorch:

    ncu --clock-control none --kernel-name regex:nvjet --launch-skip 1 --launch-count 1 --metrics ... \\
        python3 benchmarks/scripts/scaled_mm_call.py 8192 bf16

The second argument is C's type: bf16 or f32.
"""

from __future__ import annotations

import sys

import torch


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("bf16", "f32"):
        print(__doc__, file=sys.stderr)
        return 2
    n, out = int(argv[0]), torch.bfloat16 if argv[1] == "bf16" else torch.float32
    a = (torch.randn(n, n, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(n, n, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    for _ in range(3):
        torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=out)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
