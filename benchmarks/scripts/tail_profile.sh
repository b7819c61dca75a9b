#!/usr/bin/env bash
# How long the SMs sit idle at the end of a launch (the tail), with one block
# per tile (sgemm_spread_copies) and with stream-K (sgemm_stream_k), at
# N = 4096 (512 tiles of 128 x 256 on 132 SMs: 3.88 waves), 4097 (561 tiles,
# 4.25 waves) and 2048 (128 tiles, under one wave). Nsight Compute, one
# launch each, clocks left alone: time, the SMs' active cycles (mean, least,
# most) against the elapsed cycles, executed instructions and FMA-pipe
# instructions (the work the edge tiles add), and the SM clock.
# Usage, on a GPU machine with ncu on PATH:
#     bash benchmarks/scripts/tail_profile.sh OUT.txt
set -uo pipefail
out=${1:?usage: tail_profile.sh OUT.txt}
export PYTHONPATH=${PYTHONPATH:-src}
metrics=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.avg,sm__cycles_active.min,sm__cycles_active.max
metrics+=,smsp__inst_executed.sum,smsp__inst_executed_pipe_fma.sum,sm__cycles_elapsed.avg.per_second
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    date -u +%Y-%m-%dT%H:%MZ
    for n in 4096 4097 2048; do
        for kernel in sgemm_spread_copies sgemm_stream_k; do
            echo; echo "== $kernel N = $n"
            ncu --clock-control none -k regex:"$kernel" --launch-skip 1 -c 1 --metrics "$metrics" \
                python3 -m gemmlab run "$kernel" --size "$n" --reps 2 --no-tuned 2>&1 |
                grep -aE '^    (gpu__|sm__|smsp__)'
        done
    done
} > "$out"
cat "$out"
