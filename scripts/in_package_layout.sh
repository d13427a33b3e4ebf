#!/usr/bin/env bash
# Run a static checker over the dbench.* packages as they are installed. In a checkout,
# dbench/__init__.py makes bench/, ops/, scenarios/, analysis/ and run.py importable as dbench.* at
# run time, which a static reader (mypy, import-linter) cannot follow: this lays out the installed
# package's shape with symbolic links in a scratch folder, runs CMD there (that folder first on
# PYTHONPATH) and names the checkout's files in its output.
#   bash scripts/in_package_layout.sh CMD [ARG...]     exits with CMD's status
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: in_package_layout.sh CMD [ARG...]" >&2; exit 2; }
cd "$(dirname "$0")/.."
root=$PWD
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/dbench"
ln -s "$root"/dbench/*.py "$tree/dbench/"
for p in bench ops scenarios analysis run.py; do ln -s "$root/$p" "$tree/dbench/$p"; done
cd "$tree"
status=0
PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" "$@" > checker.out 2>&1 || status=$?
sed -E 's#(^|[^A-Za-z_/])dbench/(bench|ops|scenarios|analysis|run\.py)#\1\2#' checker.out
exit "$status"
