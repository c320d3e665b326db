"""The KIP-848 consumer group protocol's core (Kafka's ConsumerGroup, CurrentAssignmentBuilder
and server-side assignors), sans-I/O: no sockets, no Trio, no clock.

* ``partitions`` — assignments as ``{topic id: frozenset(partition)}`` and their set algebra;
* ``records`` — the ``__consumer_offsets`` record values of consumer groups, as dataclasses
  (the byte codecs are bound elsewhere);
* ``assignors`` — the ``uniform`` and ``range`` server-side assignors, pure functions;
* ``regex`` — RE2J-compatible validation and resolution of subscribed regular expressions;
* ``reconcile`` — one member's next assignment towards its target (revoke before assign);
* ``group`` — a consumer group and its members, the group state, partition epochs, replay;
* ``heartbeat`` — ConsumerGroupHeartbeat, leaving, session and rebalance timeouts (``tick``).

Nothing here is wired into the broker yet.
"""
