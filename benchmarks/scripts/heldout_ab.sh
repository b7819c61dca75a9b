#!/usr/bin/env bash
# The held-out benchmark on this tree and on an earlier revision, with one seed,
# for a before/after table of a dispatcher change (issue 50's closing table).
# Each side is one heldout_bench.py run (the earlier one from a git worktree of
# REVISION); then heldout_compare.py prints them side by side. On a GPU machine:
#     bash benchmarks/scripts/heldout_ab.sh REVISION OUT_DIR [SEED] [COUNT]
# Through the device tool, each side fits one call of ten minutes at COUNT=24
# (3 distributions x 24 shapes x 2 types): run SIDE=before, then SIDE=after.
set -uo pipefail
revision=${1:?usage: heldout_ab.sh REVISION OUT_DIR [SEED] [COUNT]}
out=${2:?usage: heldout_ab.sh REVISION OUT_DIR [SEED] [COUNT]}
seed=${3:-$(python3 -c "import secrets; print(secrets.randbits(32))")}
count=${4:-24}
mkdir -p "$out"
echo "seed $seed, $count shapes per distribution" | tee "$out/heldout-ab.log"
if [ "${SIDE:-both}" != after ]; then
    tree=$(mktemp -d)/before
    git worktree add --detach "$tree" "$revision" >/dev/null 2>&1 || { echo "cannot check out $revision" >&2; exit 2; }
    (cd "$tree" && PYTHONPATH=src python3 benchmarks/scripts/heldout_bench.py "$out/before.json" --seed "$seed" \
        --count "$count") 2>&1 | tee -a "$out/heldout-ab.log"
    git worktree remove --force "$tree" >/dev/null 2>&1
fi
if [ "${SIDE:-both}" != before ]; then
    PYTHONPATH=src python3 benchmarks/scripts/heldout_bench.py "$out/after.json" --seed "$seed" --count "$count" \
        2>&1 | tee -a "$out/heldout-ab.log"
fi
if [ -f "$out/before.json" ] && [ -f "$out/after.json" ]; then
    python3 benchmarks/scripts/heldout_compare.py "$out/before.json" "$out/after.json" | tee -a "$out/heldout-ab.log"
fi
