#!/usr/bin/env bash
# Where the FP32 ladder's issue slots go, beside cuBLAS SGEMM (Nsight Compute,
# one launch each at N = 4096, clocks left alone). For sgemm_multistage,
# sgemm_large_tile, sgemm_lean_loop and the kernel cuBLAS picks: the executed
# instructions, how many ran on the FMA pipe (FFMA and IMAD), shared-memory
# loads, issue slots busy, registers and the warp-state (stall) table.
# Usage, on a GPU machine with ncu on PATH:
#     bash benchmarks/scripts/fp32_issue_profile.sh OUT.txt
set -uo pipefail
out=${1:?usage: fp32_issue_profile.sh OUT.txt}
export PYTHONPATH=${PYTHONPATH:-src}
metrics=smsp__inst_executed.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_op_shared_ld.sum
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,sm__cycles_elapsed.avg.per_second
profile() {  # name filter, then the command whose second matching launch is profiled
    local filter=$1; shift
    ncu --clock-control none -k "regex:$filter" --launch-skip 1 -c 1 --section WarpStateStats \
        --print-details all --metrics "$metrics" "$@" 2>&1 |
        grep -aE '^  [A-Za-z_]|^    (smsp|launch|sm__)|Warp Cycles Per Issued|^    (Selected|Stall )' |
        awk '!/Stall/ || $NF + 0 >= 0.01'
}
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    date -u +%Y-%m-%dT%H:%MZ
    for kernel in sgemm_multistage sgemm_large_tile sgemm_lean_loop; do
        echo; profile "$kernel" python3 -m gemmlab run "$kernel" --size 4096 --reps 2 --no-tuned
    done
    echo
    profile gemm python3 -c '
import cupy as cp
a = cp.random.rand(4096, 4096, dtype=cp.float32)
b = cp.random.rand(4096, 4096, dtype=cp.float32)
for _ in range(3):
    a @ b
cp.cuda.Device().synchronize()'
} > "$out"
cat "$out"
