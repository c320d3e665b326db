"""Kafka's share coordinator core (ShareCoordinatorShard on ``__share_group_state``), sans-I/O:
no sockets, no Trio, no clock.

* ``records`` — the ShareSnapshot / ShareUpdate record values as dataclasses;
* ``codec`` — their key and value bytes in ``__share_group_state``;
* ``batches`` — combining state batches: later ranges win, ranges below the start offset go;
* ``shard`` — Initialize/Read/Write/Delete/ReadStateSummary of share-partition state, with state
  and leader epoch fencing, updates folded into snapshots, replay, and the prunable log offset.

The state batches are :class:`kafkapy.share.partition.StateBatch` values, so what a share
partition's leader writes is what this shard stores and reads back. The Trio edge that runs the
shards of the partitions a broker leads is ``kafkapy.coordinator.share_state_service``.
"""
