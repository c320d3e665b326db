"""kafkapy vs Tansu benchmark suite: `python -m benchmarks.run`, `python -m benchmarks.profile`."""
