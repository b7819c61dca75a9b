#!/usr/bin/env bash
# Capture Nsight Compute's raw CSV pages for tests/test_profile.py.
#
# Run on the GPU machine from the repository root:
#     PYTHONPATH=src OUT=/some/dir bash benchmarks/scripts/capture_ncu_fixtures.sh
# For naive (edge 16), tiled (edges 16 and 32) and naive_i32 (edge 16) at
# N = 256 it runs the very command `gemmlab profile` runs (built by
# gemmlab.measure.ncu.command.command_for) and saves everything ncu prints, stdout and
# stderr together, as $OUT/ncu_<kernel>_<edge>.csv. Captured on an H200, they
# become tests/fixtures/ncu/h200_<kernel>_<edge>.csv.
# It also saves ncu's version and metric list and checks that every metric
# gemmlab asks for is listed (the tensor-core ones too, which only tensor-core
# kernels ask for, and the 8-bit ones only FP8/INT8 kernels ask for), then parses
# each capture. About a minute.

set -uo pipefail
OUT=${OUT:-benchmarks/results/ncu}
N=256
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-src} PYTHONUNBUFFERED=1 LC_NUMERIC=C
unset LC_ALL  # ncu prints numbers in the C locale, as gemmlab.measure.ncu runs it

NCU=$(python3 -c 'from gemmlab.measure.ncu.command import find_ncu; print(find_ncu())') || exit 1
echo "ncu: $NCU"
"$NCU" --version | tail -n 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader

# Metrics of this GPU's chip; launch__* attributes may be missing from the list and still work.
"$NCU" --query-metrics > "$OUT/ncu_query_metrics.txt" 2>&1
python3 - "$OUT/ncu_query_metrics.txt" <<'PY'
import sys
from gemmlab.measure.ncu.metrics import collected_counters

listed = open(sys.argv[1]).read()
missing = [m for m in collected_counters(tensor_cores=True, eight_bit=True) if m.split(".")[0] not in listed]
print("metrics not listed by --query-metrics:", ", ".join(missing) or "none")
PY

for point in naive:16 tiled:16 tiled:32 naive_i32:16; do
    kernel=${point%%:*}
    edge=${point##*:}
    file="$OUT/ncu_${kernel}_${edge}.csv"
    mapfile -d '' -t cmd < <(python3 -c '
import sys
from gemmlab.core.shapes import Shape
from gemmlab.measure.ncu.command import command_for
kernel, edge, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.stdout.write("\0".join(command_for(kernel, Shape.square(n), edge)))
' "$kernel" "$edge" "$N")
    echo "+ ${cmd[*]}"
    start=$SECONDS
    timeout 100 "${cmd[@]}" > "$file" 2>&1
    echo "exit $? after $((SECONDS - start)) s -> $file"
    cat "$file"
done

echo "--- parsed"
python3 - "$OUT" "$N" <<'PY'
import pathlib
import sys

from gemmlab.kernels import catalogue
from gemmlab.measure.ncu import parse
from gemmlab.core.shapes import Shape

out, n = pathlib.Path(sys.argv[1]), int(sys.argv[2])
for path in sorted(out.glob("ncu_*_*.csv")):
    kernel, edge = path.stem.removeprefix("ncu_").rsplit("_", 1)
    try:
        r = parse.result_from_output(catalogue.point(kernel, Shape.square(n), int(edge)), path.read_text())
    except Exception as exc:  # report and go on: one bad capture should not hide the others
        print(f"{path.name}: {type(exc).__name__}: {exc}")
        continue
    print(
        f"{path.name}: ops {r.flops_measured:,.0f} (model {r.flops_model:,}), ld/st requests "
        f"{r.global_ld_requests:,.0f}/{r.global_st_requests:,.0f}, CGMA {r.cgma_measured:.2f}, "
        f"time {r.time_ms:.4f} ms, GIPS {r.gips:.1f}, occupancy {r.achieved_occupancy}/{r.theoretical_occupancy} %, "
        f"limited by {', '.join(r.limiting_factors)}, bank conflicts {r.bank_conflicts_ld}/{r.bank_conflicts_st}"
    )
PY
