"""Benchmarks, one command each: python -m benchmarks.bench_<name> (from the repository root)."""
