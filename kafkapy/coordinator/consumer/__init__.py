"""The KIP-848 consumer group protocol's core (Kafka's ConsumerGroup, CurrentAssignmentBuilder
and server-side assignors), sans-I/O: no sockets, no Trio, no clock.

* ``partitions`` — assignments as ``{topic id: frozenset(partition)}`` and their set algebra;
* ``records`` — the ``__consumer_offsets`` record values of consumer groups, as dataclasses
  (the byte codecs are bound elsewhere);
* ``assignors`` — the ``uniform`` and ``range`` server-side assignors, pure functions;
* ``regex`` — RE2J-compatible validation and resolution of subscribed regular expressions;
* ``reconcile`` — one member's next assignment towards its target (revoke before assign);
* ``group`` — a consumer group and its members, the group state, partition epochs, replay;
* ``heartbeat`` — ConsumerGroupHeartbeat, leaving, session and rebalance timeouts (``tick``);
* ``classic_members`` — JoinGroup/SyncGroup/Heartbeat/LeaveGroup of classic-protocol members
  inside a consumer group (mixed mode, during an online migration);
* ``migration_policy`` — ``group.consumer.migration.policy``.

The conversions themselves (classic group <-> consumer group) are ``coordinator.migration``.

Nothing here is wired into the broker yet.
"""
