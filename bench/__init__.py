"""Measurement, not serving: benchmarks, load tests, evaluation through the served engine, quality fitting.
Uses both worlds; nothing imports it, and the serving image does not hold it. It writes no model
directory: what it records in a manifest goes through model/export/measured.py."""
