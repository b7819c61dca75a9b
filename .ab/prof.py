import cProfile, pstats, sys, time, os
from gemmlab.core.shapes import Shape
from gemmlab.measure.run import run
for kernel, size, edge, dtype in [("naive", 512, 16, "float32"), ("sgemm_padded_b", 4096, None, "float32"), ("tc_fp8_tma_store", 4096, None, "e4m3-bf16")]:
    run(kernel, Shape.square(min(size, 256)), edge, dtype, reps=3)
    t=time.perf_counter()
    pr=cProfile.Profile(); pr.enable()
    r=run(kernel, Shape.square(size), edge, dtype)
    pr.disable()
    print("wall", kernel, round(time.perf_counter()-t, 3), r.timing.method, r.timing.reps, r.input_sets, r.timing.median_ms, r.ratio_to_baseline, r.ratio_interval, r.activity[:20], r.kernels_seen[:3], r.warnings)
    pstats.Stats(pr).sort_stats("tottime").print_stats(8)
