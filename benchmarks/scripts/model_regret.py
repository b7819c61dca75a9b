"""The dispatcher's cost model against the configuration studies kept in
benchmarks/results/, without a GPU: every kept row of the form {"candidate",
"shape", "dtype", "us"} (config_ab.py and the studies like it) whose rung and
configuration this gemmlab still has is grouped by GPU, element type and shape;
in each group of three or more, the model (corrected by the shipped table of
that GPU, less its picks at that shape) picks one, and its measured time is
compared with the group's fastest. Also the fill-score order the tuner used
before the model, and a pick at random (the group's mean). The rows come from
older trees than this one, and the model's constants were chosen looking at
them: a development set, not a held-out figure. Usage:

    python3 benchmarks/scripts/model_regret.py
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"


def rows_of(found: dict) -> list[dict]:
    sets = [found.get("rows")] + [c.get("rows") for c in (found.get("calls") or {}).values() if isinstance(c, dict)]
    return [r for rows in sets if isinstance(rows, list) for r in rows if isinstance(r, dict) and "candidate" in r]


def main() -> None:
    from gemmlab.core.errors import GemmlabError
    from gemmlab.core.shapes import Shape
    from gemmlab.kernels import catalogue
    from gemmlab.studies import dispatch, shipped
    from gemmlab.studies.costmodel import Calibration, predict

    models = {t.gpu_name: t.model for t in shipped.tables()}

    groups: dict[tuple[str, str, Shape], dict[tuple[str, str], float]] = defaultdict(dict)
    for path in sorted(RESULTS.glob("*.json")):
        found = json.loads(path.read_text())
        if not isinstance(found, dict):
            continue
        device = found.get("device")
        name = device.get("name") if isinstance(device, dict) else device
        for r in rows_of(found):
            kernel, *settings = r["candidate"].split()
            sides = [int(x) for x in str(r["shape"]).split("x")]
            shape = Shape(*(sides * 3 if len(sides) == 1 else sides))
            try:
                spec = catalogue.variant(kernel, {k: int(v) for k, v in (s.split("=") for s in settings)})
            except (GemmlabError, ValueError):
                continue  # a configuration this gemmlab no longer has
            if name in models and dispatch.accepts(spec, shape, r["dtype"], "sm_90a") is None:
                groups[(name, r["dtype"], shape)][(kernel, json.dumps(spec.config, sort_keys=True))] = r["us"]
    regrets: dict[str, list[float]] = defaultdict(list)
    for (name, dtype, shape), measured in sorted(groups.items(), key=str):
        if len(measured) < 3:
            continue
        gpu = models[name]
        picks = [p for p in shipped.shipped_picks(name) if p.shape != shape]
        calibration = Calibration.of(picks, gpu, dispatch.resident)
        best = min(measured.values())
        scored = []
        for (kernel, text), us in measured.items():
            config = json.loads(text)
            spec = catalogue.variant(kernel, config)
            time = predict(kernel, spec, shape, dtype, gpu, dispatch.resident(kernel, spec)).us
            fill = dispatch.fill_rank(dispatch.Candidate(kernel, config, spec), shape, 132)
            factor = calibration.correction(dtype, kernel, config, shape).factor
            scored.append((time * factor, time, (-fill[0], -fill[1]), us))
        for label, index in (("model and shipped table", 0), ("model alone", 1), ("fill-score order", 2)):
            regrets[label].append(min(scored, key=lambda s: s[index])[3] / best)
        regrets["at random (the mean)"].append(sum(measured.values()) / len(measured) / best)
    count = len(regrets["model alone"])
    print(f"{count} groups (GPU, element type, shape) of 3 or more measured configurations")
    for label, found in regrets.items():
        geomean = math.exp(sum(math.log(r) for r in found) / len(found))
        near = sum(r <= 1.05 for r in found)
        print(f"{label:<24} measured time of its pick over the group's fastest: geomean {geomean:.3f}, worst "
              f"{max(found):.2f}; within 5% of the fastest in {near} of {len(found)}")  # fmt: skip


if __name__ == "__main__":
    main()
