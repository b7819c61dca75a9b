"""CLI commands beyond the core ones, one module per feature.

Each module registers its commands on ``gemmlab.cli.app`` when imported;
``gemmlab.cli`` imports them all at the end.
"""
