"""Peer ladders: the same GEMMs as the CUDA C++ ladders, written in Triton and
in the CuTe DSL (docs/peer-ladders.md). Their entries are in spec.py; the
kernel files import their library, so only the backend imports them."""
