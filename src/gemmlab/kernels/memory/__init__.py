"""The memory-bound lab (the .cu files beside this one)."""
