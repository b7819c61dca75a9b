"""The tensor-core ladder (the .cu files beside this one)."""
