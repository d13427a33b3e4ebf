"""The harness: what owns a run once the command line is read and the device picked.

`rounds.Run` is the run object of one process: it reserves the result file, builds the cases, makes
the passes the scenario declares (bench/core/passes.py) in their fixed order and returns the final
result document. `custom` runs a scenario that makes its own table; `several` runs a scenario in
fresh processes (--processes, --ab) or shards (--gpus, --shards) and merges them. `interrupts`
makes any ending (Ctrl-C, SIGTERM, a failed write) leave a result with its final status; `device`
picks and pins what the run times on. Nothing here renders: the command layer (run.py) shows the
document through dbench.analysis.
"""
