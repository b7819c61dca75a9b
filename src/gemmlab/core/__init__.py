"""Shapes, element types, architecture limits, errors and the GPU handle: what every layer shares."""
