"""`python3 -m dbench COMMAND ...`: the `dbench` command without its console script."""

from dbench.main import entry

entry()
