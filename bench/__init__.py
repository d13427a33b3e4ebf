"""Measuring and running, in layers (each imports only those below it: docs/architecture.md, "Layers"):
core/ the timing core, io/ result documents, harness/ one process's run, children/ runs in several
processes; instructions/ is the callgrind check's own entry, cpp/ the C++ driver, cupti/ the CUPTI
collector."""
