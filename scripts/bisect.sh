#!/usr/bin/env bash
# Which commit between GOOD and BAD made the boundary table slower: git bisect, each commit it
# visits set up in a worktree of its own and judged by the gate against GOOD, the two run one process
# at a time in turn (scripts/interleave.sh) so they share the host's state.
#   bash scripts/bisect.sh GOOD BAD [N] [-- run.py options...]
# N processes per side and step (default 4). Narrow the run to the rows that moved (e.g.
# -- --ops muladd --variants cpp,function_cpp) to make each step short. A step whose gate FAILs is
# bad, one that PASSes good; one that cannot be set up or run, or decides nothing, is skipped (git
# bisect's 125). The gate and these scripts come from this checkout, which is left as it is; the
# runs stay in the folder printed at the end. Exit: 0 when bisect named a commit, 1 when it did
# not, 2 bad usage.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "bisect.sh: error: $*" >&2; exit 2; }

if [ "${1:-}" = --step ]; then  # git bisect run calls this in the bisect worktree
  shift; work=$1 n=$2; shift 2
  sha=$(git rev-parse --short HEAD)
  echo "[bisect] $sha: setting up"
  bash scripts/setup.sh > "$work/setup-$sha.log" 2>&1 || { echo "[bisect] $sha: set-up failed: skip"; exit 125; }
  bash "$REPO/scripts/interleave.sh" "$work/good" . "$n" "$work/runs/$sha" "$@" || { echo "[bisect] $sha: a run failed: skip"; exit 125; }
  # The gate of the checkout bisect.sh came from (not of the commit under test), by module from its root.
  (cd "$REPO" && python3 -m dbench.analysis.gate "$work/runs/$sha/b" "$work/runs/$sha/a" --format md) \
    > "$work/runs/$sha/gate.md" 2>&1
  rc=$?
  echo "[bisect] $sha: $(head -1 "$work/runs/$sha/gate.md")"
  case $rc in 0) exit 0 ;; 1) exit 1 ;; *) exit 125 ;; esac
fi

[ $# -ge 2 ] || die "usage: bisect.sh GOOD BAD [N] [-- run.py options...]"
good=$1 bad=$2; shift 2
n=4
if [ $# -gt 0 ] && [ "$1" != -- ]; then n=$1; shift; fi
[ "${1:-}" = -- ] && shift
if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 2 ]; then die "N must be a whole number ≥ 2, got '$n'"; fi
good_sha=$(git -C "$REPO" rev-parse --verify --quiet "$good^{commit}") || die "$good is not a commit"
bad_sha=$(git -C "$REPO" rev-parse --verify --quiet "$bad^{commit}") || die "$bad is not a commit"
[ "$good_sha" != "$bad_sha" ] || die "GOOD and BAD are the same commit"
git -C "$REPO" merge-base --is-ancestor "$good_sha" "$bad_sha" || die "$good is not an ancestor of $bad"

work=$(mktemp -d "${TMPDIR:-/tmp}/dbench-bisect.XXXXXX")
cleanup() {
  git -C "$work/bisect" bisect reset --quiet >/dev/null 2>&1
  git -C "$REPO" worktree remove --force "$work/bisect" >/dev/null 2>&1
  git -C "$REPO" worktree remove --force "$work/good" >/dev/null 2>&1
}
trap cleanup EXIT
git -C "$REPO" worktree add --quiet --detach "$work/good" "$good_sha" || die "cannot check out $good"
git -C "$REPO" worktree add --quiet --detach "$work/bisect" "$bad_sha" || die "cannot check out $bad"
echo "[bisect] setting up $good ($good_sha) once"
(cd "$work/good" && bash scripts/setup.sh > "$work/setup-good.log" 2>&1) || die "set-up of $good failed (log: $work/setup-good.log)"
cd "$work/bisect" || exit 2
git bisect start "$bad_sha" "$good_sha" >/dev/null || die "git bisect cannot start"
git bisect run bash "$REPO/scripts/bisect.sh" --step "$work" "$n" "$@" | tee "$work/bisect.log"
git bisect log > "$work/bisect-log.txt"
echo "[bisect] runs, gate tables and logs: $work"
grep -q "is the first bad commit" "$work/bisect.log"
