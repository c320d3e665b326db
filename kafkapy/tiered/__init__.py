"""Tiered storage (KIP-405): copying closed log segments to a remote store and reading them back."""
