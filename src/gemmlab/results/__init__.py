"""The results database."""
