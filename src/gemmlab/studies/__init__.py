"""Many points at once: sweeps, the tuner, and the documents' experiments."""
