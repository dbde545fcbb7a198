"""Benchmarks: accuracy against the Kalman observers of the observer benchmark, and speed."""
