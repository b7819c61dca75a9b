"""How a kernel becomes something to launch: NVRTC-compiled CUDA, and the CPU baselines."""
