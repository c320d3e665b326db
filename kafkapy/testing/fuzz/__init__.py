"""A structure-aware fuzzer for a live node: ``python -m kafkapy.testing.fuzz`` (docs/fuzzing.md).

seeds (the corpus, hand-built requests), record (the stock clients through a recording proxy),
schema (where lengths and counts are), mutators (frame i of a campaign), probe (liveness),
ledger (acknowledged data and committed offsets), health (/proc and the log), campaign (the run).
The pre-authentication campaign (``--listener``): preauth (the run), preauth_frames (SASL
conversations), preauth_oracle (who logged in, what was answered), tls_garbage (broken TLS).
"""
