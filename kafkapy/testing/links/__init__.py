"""Cluster links between two clusters in emulated sites: tokyo and osaka, a WAN between them,
disaster and fail-back measured (RPO, RTO, lag, catch-up). See ``clusters``, ``scenario``,
``measure`` and the runnable ``run``."""
