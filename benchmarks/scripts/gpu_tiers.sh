#!/usr/bin/env bash
# The GPU suite in tiers, each under five minutes on one H100 or H200, instead
# of one run of about ten. Together the tiers run every GPU test once:
#   smoke      the tests marked smoke: one per layer (a document's kernel, a
#              memory kernel, an FP32 rung, a tensor-core rung, `gemmlab run`,
#              `gemmlab reproduce` through the store to the report); a minute or two
#   shard K/N  the K-th of N shares of the other GPU tests that are not
#              whole_gpu, run by WORKERS pytest-xdist processes side by side
#              (tests/conftest.py's --shard: every N-th test in collection order)
#   whole      the whole_gpu tests (peak rates, timings and the ratios of two
#              timings, measured ceilings): one process, nothing else on the GPU
# Each writes OUT_DIR/<tier>.log (pytest's output) and OUT_DIR/<tier>.xml (JUnit);
# the exit status is pytest's.
#
# Usage, from the repository root on a GPU machine with gemmlab[test] installed:
#     bash benchmarks/scripts/gpu_tiers.sh smoke OUT_DIR
#     bash benchmarks/scripts/gpu_tiers.sh shard 1/3 OUT_DIR     (then 2/3, 3/3)
#     bash benchmarks/scripts/gpu_tiers.sh whole OUT_DIR
# Through the device tool, one call a tier, each well under its five minutes:
#     run(command="bash benchmarks/scripts/gpu_tiers.sh smoke $OUT", timeout_s=300)
#     run(command="bash benchmarks/scripts/gpu_tiers.sh shard 1/3 $OUT", timeout_s=300)   (then 2/3, 3/3)
# Three shards, not two: on an H100 on 2026-11-23 two shards took 190 to 325 s
# each (benchmarks/results/2026-11-23_h100_gpu-tiers.txt), the slower over five minutes.
# The shard that draws test_gpu_kernels.py::test_memcheck_clean_on_every_kernel
# (shard 3 of 3 on 2026-11-24) runs longest: that test alone took 361 s on an
# H100 started cold, and the shard 424 s with WORKERS=8
# (benchmarks/results/2026-11-24n_gpu-tiers.txt): give it timeout_s=600.
#     run(command="bash benchmarks/scripts/gpu_tiers.sh whole $OUT", timeout_s=300)
# The tiers share one compile cache ($GEMMLAB_TEST_CACHE, by default under
# /tmp), so on a machine kept warm between calls a kernel compiles once for
# all of them. WORKERS (default 4) sets the processes of a shard; if a shard
# runs long, split finer (shard 1/3 ...) rather than add workers: they share
# one GPU.
set -uo pipefail
tier=${1:?usage: gpu_tiers.sh smoke|whole OUT_DIR, or gpu_tiers.sh shard K/N OUT_DIR}
case $tier in
    smoke) select="gpu and smoke"; name=smoke; extra=(-p no:xdist) ;;
    whole) select="gpu and whole_gpu"; name=whole; extra=(-p no:xdist) ;;
    shard)
        share=${2:?usage: gpu_tiers.sh shard K/N OUT_DIR}
        shift
        select="gpu and not smoke and not whole_gpu"
        name=shard-${share/\//-of-}
        extra=(--shard "$share" -n "${WORKERS:-4}" --dist loadgroup)
        ;;
    *) echo "gpu_tiers.sh: unknown tier '$tier' (smoke, shard K/N, whole)" >&2; exit 2 ;;
esac
out=${2:?usage: gpu_tiers.sh $tier OUT_DIR}
# A per-test limit where pytest-timeout is installed (the lent machines have it): a test
# that runs long then fails with its traceback, instead of the device call's limit cutting
# the tier off with nothing printed (2026-11-29: the adversarial class, cut off twice).
if python3 -c "import pytest_timeout" 2>/dev/null; then
    extra+=(--timeout "${TEST_TIMEOUT:-420}")
fi
mkdir -p "$out"
export PYTHONPATH=${PYTHONPATH:-src}
# Without cupti-python (a dependency) the checks that read GPU activity fail by
# design; on the lent machines it is not installed: carry its wheel (docs/testing.md).
if ! python3 -c "from cupti import cupti" 2>/dev/null; then
    echo "gpu_tiers.sh: cupti-python, a dependency of gemmlab, is not importable here;" \
        "install it (pip install 'cupti-python>=13.0.1,<14') and run again" >&2
    exit 2
fi
export GEMMLAB_TEST_CACHE=${GEMMLAB_TEST_CACHE:-${TMPDIR:-/tmp}/gemmlab-gpu-tiers-cache}
{
    nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
    date -u +%Y-%m-%dT%H:%M:%SZ
    echo "tier $name: -m '$select' ${extra[*]}"
} > "$out/$name.log" 2>&1
start=$SECONDS
python3 -m pytest -q -p no:cacheprovider -rs -m "$select" "${extra[@]}" --junitxml="$out/$name.xml" \
    --durations=15 2>&1 | tee -a "$out/$name.log"
status=${PIPESTATUS[0]}
echo "tier $name: pytest exit $status after $((SECONDS - start)) s" | tee -a "$out/$name.log"
exit "$status"
