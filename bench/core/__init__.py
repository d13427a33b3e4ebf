"""The timing core: cases, the interleaved runner and its GPU timers, statistics, row identity, the
speed probe, the native build and the trust rules for paths. Imports nothing of dbench but itself: the
ops (dbench.ops) are built on it."""
