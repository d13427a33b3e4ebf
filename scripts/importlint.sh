#!/usr/bin/env bash
# import-linter's contracts (pyproject.toml [tool.importlinter]: the packages' layers, no cycles)
# over the dbench.* packages; extra arguments go to lint-imports. (scripts/in_package_layout.sh: why
# it runs over the installed package's layout.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exec bash "$root/scripts/in_package_layout.sh" "${PYTHON:-python3}" -c \
  'import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())' \
  "$root/pyproject.toml" --no-cache "$@"
