#!/usr/bin/env bash
# mypy over the dbench.* packages, with pyproject.toml's [tool.mypy]; extra arguments go to mypy.
# In a checkout, dbench/__init__.py makes bench/, ops/, scenarios/, analysis/ and run.py importable
# as dbench.* at run time, which mypy cannot follow: this lays out the installed package's shape
# with symbolic links in a scratch folder, checks that, and names the checkout's files in its output.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/dbench"
ln -s "$root"/dbench/*.py "$tree/dbench/"
for p in bench ops scenarios analysis run.py; do ln -s "$root/$p" "$tree/dbench/$p"; done
cd "$tree"
status=0
"${PYTHON:-python3}" -m mypy --config-file "$root/pyproject.toml" "$@" > mypy.out 2>&1 || status=$?
sed -E 's#^dbench/(bench|ops|scenarios|analysis|run\.py)#\1#' mypy.out
exit "$status"
