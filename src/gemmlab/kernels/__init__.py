"""The kernels: their spec type, the catalogue, the ladders' rung type, and one folder
per family, each with its .cu files beside its spec."""
