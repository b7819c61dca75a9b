#!/usr/bin/env bash
# The walkthrough for users' kernels (docs/walkthroughs.md), run as a newcomer would, with
# every command's output kept: a CUDA file and a Triton function through run,
# check, profile, sweep and report, then the faulty examples, each of which a
# check must catch and name. Usage on a GPU machine, from the repository root:
#     bash benchmarks/scripts/walkthrough.sh OUT_DIR
set -uo pipefail
out=${1:?usage: walkthrough.sh OUT_DIR}
mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:-src}
step() {
    echo "\$ gemmlab $*"
    local start=$SECONDS
    python3 -m gemmlab "$@"
    echo "[exit $?, $((SECONDS - start)) s]"
    echo
}
{
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    date -u +%Y-%m-%dT%H:%M:%SZ
    step run examples/naive_define/matmul.cu --size 1024 --vs tiled,sgemm_padded_b
    step run examples/triton_matmul/matmul.py --size 4096 --vs examples/torch_matmul/matmul.py
    step check examples/naive_define/matmul.cu examples/triton_matmul/matmul.py --tool memcheck --tool racecheck
    step profile examples/naive_define/matmul.cu --size 1024
    step profile examples/triton_matmul/matmul.py --size 1024
    step sweep --kernels examples/naive_define/matmul.cu,examples/triton_matmul/matmul.py,tiled --sizes 512,1024,2048 \
        --db "$out/mine.sqlite"
    step report --db "$out/mine.sqlite" --out "$out/mine-report"
} > "$out/walkthrough.txt" 2>&1
{
    faulty=examples/faulty
    step sweep --kernels $faulty/oob_write/matmul.toml,$faulty/lower_precision/matmul.toml,$faulty/accumulate_into_c/matmul.toml,$faulty/cached_answer/matmul.toml,$faulty/fault/matmul.toml,$faulty/hang/matmul.toml,examples/naive_define/matmul.toml \
        --sizes 500,512 --blocks 16 --db "$out/faulty.sqlite" --timeout 20
    step check $faulty/missing_sync/matmul.toml --tool racecheck
    step run examples/broken/matmul.toml --size 256
} > "$out/faulty.txt" 2>&1
tail -c 6000 "$out/walkthrough.txt"
tail -c 4000 "$out/faulty.txt"
