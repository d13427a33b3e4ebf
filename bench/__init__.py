"""Drivers and timers: the interleaved Python runner, statistics, environment capture, result files."""
