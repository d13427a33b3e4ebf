#!/usr/bin/env bash
# mypy over the dbench.* packages, with pyproject.toml's [tool.mypy]; extra arguments go to mypy.
# (scripts/in_package_layout.sh: why it runs over the installed package's layout.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec bash "$root/scripts/in_package_layout.sh" "${PYTHON:-python3}" -m mypy --config-file "$root/pyproject.toml" "$@"
