"""Running, timing and explaining one point: runner, timing, environment,
Nsight Compute, sanitizer, SASS, occupancy, peaks, roofline."""
