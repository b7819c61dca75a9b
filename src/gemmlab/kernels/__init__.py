"""The kernels: their spec type, the catalogue, the ladders' rung type, and one folder per family
(.cu files beside their spec)."""
