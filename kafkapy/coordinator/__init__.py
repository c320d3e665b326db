"""Coordinators backed by internal topics: today the group coordinator (classic protocol) and its
committed offsets in ``__consumer_offsets``.

* ``schema`` — the key/value record layouts of ``__consumer_offsets`` and group placement (pure);
* ``classic_group`` — a group's and its members' state (sans-I/O);
* ``outcome`` — the requests, answers and records an operation hands to the edge (sans-I/O);
* ``membership`` — the classic join/sync/heartbeat/leave rebalance state machine (sans-I/O);
* ``offsets`` — committed offsets: commit, fetch, delete, retention (sans-I/O);
* ``txn_offsets`` — transactional offsets pending until their transaction ends (sans-I/O);
* ``group`` — one partition's shard: routes to the two above, DeleteGroups, log replay (sans-I/O);
* ``service`` — the Trio edge: loading, log writes, parked requests, timers.
"""
