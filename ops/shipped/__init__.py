"""The shipped ops, one module each: ops/shipped/<name>.py holds the op's CONTRACT (its Python half,
and its Triton launchers where it has them); ops/catalog.py loads them by the names listed in
ops/specs.py OP_NAMES, and each one's native half is ops/native/<name>.h."""
