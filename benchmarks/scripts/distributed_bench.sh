#!/usr/bin/env bash
# The distributed GEMM ladder on this host's GPUs (docs/distributed.md): every rung
# at 4096, 8192 and 16384 (bf16 in, fp32 out) on 1 and 2 GPUs, strong and weak
# scaling, verified and timed. A few minutes on 2 x H200.
#   bash benchmarks/scripts/distributed_bench.sh [GPU counts, default 1,2] [results folder]
# Needs torch (pip install -e '.[multigpu]'); NVLink multicast stays off.
set -euo pipefail
GPUS="${1:-1,2}"
OUT="${2:-benchmarks/results}"
mkdir -p "$OUT"
STAMP="$(date -u +%Y-%m-%dT%H%M)"
export NCCL_NVLS_ENABLE=0
export PYTHONPATH=${PYTHONPATH:-src}  # a checkout runs as is; an installed gemmlab is found either way
python3 -m gemmlab distributed --gpus "$GPUS" --sizes 4096,8192,16384 --scaling strong,weak \
    --reps 10 --warmup 3 --timeout 280 \
    --out "$OUT/distributed-$STAMP.json" --db "$OUT/distributed.sqlite" \
    --work-dir "$OUT/distributed-logs-$STAMP"
