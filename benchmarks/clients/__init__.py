"""Benchmark clients, each run as its own process (see `benchmarks.workloads`)."""
