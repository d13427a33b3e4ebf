"""Shipped ops declared in a module of their own: ops/shipped/<name>.py holds the op's CONTRACT (its
Python half, and its Triton launchers where it has them); ops/catalog.py finds it by the name listed
in ops/specs.py OP_NAMES, and its native half is ops/native/<name>.h."""
