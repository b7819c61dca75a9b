#!/usr/bin/env bash
# What the TMA store changes in the epilogue (Nsight Compute, one launch each
# of tc_cluster and tc_tma_store, bfloat16 inputs at N = 4096, clocks left
# alone): time, the tensor pipe's busy share, executed instructions, global
# store instructions and the L2 write sectors and requests they cause, DRAM
# bytes written; tc_tma_store with float32 and with bfloat16 C.
# Usage, on a GPU machine with ncu on PATH:
#     bash benchmarks/scripts/tma_store_profile.sh OUT.txt
set -uo pipefail
out=${1:?usage: tma_store_profile.sh OUT.txt}
export PYTHONPATH=${PYTHONPATH:-src}
metrics=gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed
metrics+=,smsp__inst_executed.sum,smsp__inst_executed_op_global_st.sum,smsp__inst_executed_op_shared_st.sum
metrics+=,lts__t_sectors_op_write.sum,lts__t_requests_op_write.sum,dram__bytes_write.sum,launch__registers_per_thread
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    date -u +%Y-%m-%dT%H:%MZ
    for case in "tc_cluster bfloat16" "tc_tma_store bfloat16" "tc_tma_store bfloat16-out"; do
        set -- $case
        echo; echo "== $1 $2"
        ncu --clock-control none -k "regex:$1" --launch-skip 1 -c 1 --metrics "$metrics" \
            python3 -m gemmlab run "$1" --size 4096 --dtype "$2" --reps 2 --no-tuned 2>&1 |
            grep -aE '^    (gpu__|sm__|smsp__|lts__|dram__|launch__)'
    done
} > "$out"
cat "$out"
