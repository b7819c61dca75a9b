"""Kinds of work a kernel does: inputs, float64 reference, library baseline, one module each."""
