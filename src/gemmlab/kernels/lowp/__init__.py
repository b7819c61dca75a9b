"""The 8-bit tensor-core ladder: int8 and FP8 (docs/lowp-ladder.md)."""
