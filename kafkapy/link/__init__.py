"""Cluster links: mirror topics filled from another cluster, offsets and configs kept in step.

A link lives on the destination cluster; see ``manager`` for what every broker runs for it and
``mirror_fetcher`` for how a mirror partition is filled byte for byte at the source's offsets.
"""
