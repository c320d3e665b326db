"""Coordinators backed by internal topics: today the group coordinator (classic protocol) and its
committed offsets in ``__consumer_offsets``.

* ``schema`` — the key/value record layouts of ``__consumer_offsets`` and group placement (pure);
* ``group`` — the group state machine and offsets of one partition (sans-I/O);
* ``service`` — the Trio edge: loading, log writes, parked requests, timers.
"""
