"""How a kernel becomes something to launch: NVRTC-compiled CUDA, and the CPU baselines."""

# The names a stored result gives the backend that ran it (the ``backend`` column of results).
NVRTC = "nvrtc"
CPU = "cpu"
