"""JSON schemas of the ``__share_group_state`` records (KIP-932), from Kafka 4.4's share-coordinator
jar: ShareSnapshotKey/Value (record type 0, a partition's whole share state) and
ShareUpdateKey/Value (record type 1, a change on top of the last snapshot).

Read through ``kafkapy.protocol.schema_codec``, as the ``coordinator/`` records are.
"""
