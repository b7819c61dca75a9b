"""The dispatcher's cost model against a shipped table, without a GPU: each
pick of the table is left out in turn, and the model, corrected by the other
picks, chooses for its shape. Reports, per element type, how often the chosen
rung (and configuration) is the measured pick's, and the model's predicted time
for the measured pick against its measured time. Agreement, not speed: where
the model chose another rung, that rung was not timed on the shape. Usage:

    python3 benchmarks/scripts/model_check.py ["NVIDIA H200"]
"""

from __future__ import annotations

import statistics
import sys


def main() -> None:
    from gemmlab.kernels import catalogue
    from gemmlab.studies import dispatch, shipped
    from gemmlab.studies.costmodel import Calibration, predict

    name = sys.argv[1] if len(sys.argv) > 1 else "NVIDIA H200"
    table = next(t for t in shipped.tables() if t.gpu_name == name)
    gpu = table.model  # the table's GPU: its SMs, boost clock and bandwidth
    picks = list(table.picks)
    print(f"{name}: {len(picks)} picks measured {table.measured}, each left out in turn")
    print(f"{'dtype':<13} {'shape':<16} {'measured pick':<24} {'model chose':<24} {'pred us':>9} {'meas us':>9}")
    tallies: dict[str, list[int]] = {}
    errors: dict[str, list[float]] = {}
    for i, pick in enumerate(picks):
        rest = picks[:i] + picks[i + 1 :]
        calibration = Calibration.of(rest, gpu, dispatch.resident)
        chosen = dispatch.choose(rest, pick.shape, pick.dtype, "sm_90a", gpu=gpu, calibration=calibration)
        spec = catalogue.variant(pick.kernel, pick.config.values)
        factor = calibration.correction(pick.dtype, pick.kernel, pick.config.values, pick.shape).factor
        predicted = (
            factor * predict(pick.kernel, spec, pick.shape, pick.dtype, gpu, dispatch.resident(pick.kernel, spec)).us
        )
        measured = 1e3 * pick.median_ms
        same_rung = chosen.kernel == pick.kernel
        same = same_rung and chosen.config == pick.config.values
        tally = tallies.setdefault(pick.dtype, [0, 0, 0])
        tally[0] += 1
        tally[1] += same_rung
        tally[2] += same
        errors.setdefault(pick.dtype, []).append(predicted / measured)
        print(f"{pick.dtype:<13} {pick.shape!s:<16} {pick.kernel:<24} {chosen.kernel:<24} {predicted:9.1f} "
              f"{measured:9.1f}")  # fmt: skip
    for dtype, (count, rung, config) in tallies.items():
        ratios = errors[dtype]
        print(f"{dtype}: the measured pick's rung chosen for {rung} of {count} shapes, its configuration too for "
              f"{config}; predicted over measured time of the measured pick: median {statistics.median(ratios):.2f}, "
              f"{min(ratios):.2f} to {max(ratios):.2f}")  # fmt: skip
    total = [sum(t[j] for t in tallies.values()) for j in range(3)]
    print(f"all: rung chosen for {total[1]} of {total[0]}, configuration too for {total[2]}")


if __name__ == "__main__":
    main()
