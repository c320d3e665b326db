"""KIP-932 share groups on the partition leader: the per-partition record states
(:mod:`.partition`) and the ShareFetch sessions (:mod:`.sessions`). Both are sans-I/O: time comes in
as ``now_ms`` and the edge reads the log and persists the state."""
