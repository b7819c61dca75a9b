#!/usr/bin/env bash
# Why a rung (sgemm_lean_loop unless others are named) is slower at N = 4095
# and 4097 than at 4096 (Nsight Compute, one launch each, clocks left alone): time, executed instructions
# and the FMA pipe's share, issue slots busy, L2 read sectors and requests
# (misaligned rows of A and B straddle more 32-byte sectors), DRAM bytes, the
# warps' cycles per issued instruction, and the stall table.
# Usage, on a GPU machine with ncu on PATH:
#     bash benchmarks/scripts/odd_size_profile.sh OUT.txt [KERNEL ...]
set -uo pipefail
out=${1:?usage: odd_size_profile.sh OUT.txt [KERNEL ...]}
shift
kernels=("${@:-sgemm_lean_loop}")
export PYTHONPATH=${PYTHONPATH:-src}
metrics=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__inst_executed_pipe_fma.sum
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_read.sum,lts__t_requests_op_read.sum
metrics+=,dram__bytes_read.sum,sm__cycles_elapsed.avg.per_second
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    date -u +%Y-%m-%dT%H:%MZ
    for kernel in "${kernels[@]}"; do
        for n in 4096 4095 4097; do
            echo; echo "== $kernel N = $n"
            ncu --clock-control none -k "regex:$kernel" --launch-skip 1 -c 1 --section WarpStateStats \
                --print-details all --metrics "$metrics" \
                python3 -m gemmlab run "$kernel" --size "$n" --reps 2 --no-tuned 2>&1 |
                grep -aE '^    (gpu__|sm__|smsp__|lts__|dram__)|Warp Cycles Per Issued|^    Stall ' |
                awk '!/Stall/ || $NF + 0 >= 0.01'
        done
    done
} > "$out"
cat "$out"
