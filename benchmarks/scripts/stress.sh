#!/usr/bin/env bash
# Issue 23's stress run: every kernel that synchronises across blocks or
# through memory (`gemmlab stress`'s default list: tc_cluster, tc_tma_store,
# sgemm_stream_k, sgemm_padded_b and the persistent kernels) checked for at
# least TOTAL (100,000) launches each on random shapes, in PROCESSES (4)
# worker processes at once beside a cuBLAS GEMM load, every launch from a
# poisoned output and checked.
#
# The work is cut into chunks of CHUNK (25,000) launches of one kernel, each
# one `gemmlab stress` call with a seed of its own (chunk c: seed 100 c, so
# process p draws with 100 c + p and no two chunks draw alike). All chunks
# store into OUT_DIR/stress.sqlite; a finished chunk leaves
# OUT_DIR/done/<kernel>.<c> and its output in OUT_DIR/<kernel>.<c>.log, and a
# second call skips it. A call starts no chunk after BUDGET_S seconds, so that
# it fits a 10-minute device command; call it again until it says "all done".
#
# Usage, from the repository root on a GPU machine:
#     bash benchmarks/scripts/stress.sh OUT_DIR [BUDGET_S]
# Through the device tool, OUT_DIR under build/ (git ignores it, so a warm
# machine keeps it between calls), each call copying it out:
#     run(command="bash benchmarks/scripts/stress.sh build/stress 420; s=$?; cp -r build/stress $OUT; exit $s",
#         timeout_s=600)
# If the machine went cold between calls, copy the last call's build/stress
# back into the checkout and add carry=["build/stress"] (carry a path only
# when it exists here: a carried path missing here is removed there).
#
# Duration, measured on one H100 on 2026-11-23 (benchmarks/results/
# 2026-11-23_h100_stress.txt): a chunk of 25,088 launches took 96 to 102 s
# with 4 processes and 60 to 77 s with 8 (PROCESSES=8), the five kernels
# about 28 minutes: four calls of some 480 s.
#
# Exit status: 0 when every chunk is done and no draw failed; 3 when chunks
# are left (call again); 4 when a chunk found a wrong result, a fault or a
# hang (it is stored; the log names the draw and how to replay it; the chunk
# counts as done, so the other kernels still run).
set -uo pipefail
out=${1:?usage: stress.sh OUT_DIR [BUDGET_S]}
budget=${2:-420}
total=${TOTAL:-100000}
chunk=${CHUNK:-25000}
processes=${PROCESSES:-4}
export PYTHONPATH=${PYTHONPATH:-src}
mkdir -p "$out/done"
db=$out/stress.sqlite
gemmlab() { python3 -c "from gemmlab.cli import main; main()" "$@"; }
kernels=$(python3 -c "from gemmlab.studies.stress import default_kernels; print(*default_kernels())")
chunks=$(( (total + chunk - 1) / chunk ))
start=$SECONDS
status=0
left=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader >> "$out/gpu.txt" 2>&1
for kernel in $kernels; do
    for c in $(seq 1 "$chunks"); do
        [ -e "$out/done/$kernel.$c" ] && continue
        if (( SECONDS - start >= budget )); then
            left=$((left + 1))
            continue
        fi
        echo "$(date -u +%H:%M:%S) $kernel chunk $c of $chunks" >&2
        gemmlab stress "$kernel" --launches "$chunk" --launches-per-draw 32 --processes "$processes" --load \
            --seed $((100 * c)) --db "$db" > "$out/$kernel.$c.log" 2>&1
        code=$?
        tail -n 20 "$out/$kernel.$c.log" >&2
        case $code in
            0) touch "$out/done/$kernel.$c" ;;
            4) touch "$out/done/$kernel.$c"; status=4 ;;
            *) echo "stress.sh: $kernel chunk $c stopped with exit $code; it runs again next call" >&2; [ "$status" = 0 ] && status=1 ;;
        esac
    done
done
# Every kernel's launches and failures over all the chunks stored so far
# (shapes: the distinct shapes of each chunk, summed).
[ -e "$db" ] && python3 - "$db" <<'EOF' | tee "$out/summary.txt"
import sys
from collections import defaultdict

from gemmlab.store.store import Store

totals = defaultdict(lambda: defaultdict(int))
with Store.open(sys.argv[1], readonly=True) as store:
    for row in store.stress_summaries():
        for name in ("launches", "wrong", "faults", "hangs", "errors", "shapes"):
            totals[row["kernel"]][name] += row[name]
        totals[row["kernel"]]["chunks"] += 1
print(f"{'kernel':<18}{'chunks':>7}{'launches':>10}{'wrong':>7}{'faults':>7}{'hangs':>6}{'errors':>7}{'shapes':>8}")
for kernel, t in totals.items():
    print(f"{kernel:<18}{t['chunks']:>7}{t['launches']:>10}{t['wrong']:>7}{t['faults']:>7}{t['hangs']:>6}"
          f"{t['errors']:>7}{t['shapes']:>8}")
EOF
if (( left > 0 )); then
    echo "stress.sh: $left chunks left after $((SECONDS - start)) s; call again" >&2
    [ "$status" = 0 ] && status=3
else
    echo "stress.sh: all done after $((SECONDS - start)) s" >&2
fi
exit "$status"
