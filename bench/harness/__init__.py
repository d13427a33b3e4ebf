"""The harness: what owns a run in one process once the command line is read.

`cli` reads and checks the command line (torch-free), `options` resolves it once into the frozen
`RunOptions`, `device` and `placement` pick what the run times on and the cores it pins to, `sides`
checks an A/B run's sides. `rounds.Run` is the run object of one process: it reserves the result
file, builds the cases, makes the passes the scenario declares (bench/core/passes.py) in their fixed
order and returns the final result document; `custom` runs a scenario that makes its own table.
`interrupts` makes any ending (Ctrl-C, SIGTERM, a failed write) leave a result with its final
status, `supervisor` ends the result of a worker that crashed, `guard` gives every command its exit
status. Runs in several processes are one layer up (bench/children). Nothing here renders tables:
the command layer (run.py) shows the document through dbench.analysis.
"""
