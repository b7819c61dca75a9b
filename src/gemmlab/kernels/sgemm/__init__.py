"""The FP32 ladder (the .cu files beside this one)."""
