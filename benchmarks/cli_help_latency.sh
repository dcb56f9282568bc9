#!/bin/sh
# Wall time of `grpojax --help`, 7 runs each, for a baseline checkout and this one, in the same run.
# Usage (a timing benchmark: under the shared lock):
#   flock /tmp/grpojax-heavy.lock sh benchmarks/cli_help_latency.sh BASELINE_CHECKOUT
# BASELINE_CHECKOUT: a worktree of an earlier commit (git worktree add DIR COMMIT), put first on PYTHONPATH.
BASE=${1:?usage: cli_help_latency.sh BASELINE_CHECKOUT}
HERE=$(cd "$(dirname "$0")/.." && pwd)
uptime
for label in baseline now; do
  if [ $label = baseline ]; then PP=$BASE; else PP=$HERE; fi
  for i in 1 2 3 4 5 6 7; do
    s=$(date +%s.%N)
    PYTHONPATH=$PP "$HERE/.venv/bin/python" -c "import sys; sys.argv=['grpojax','--help']; from grpojax.cli import main; main()" >/dev/null 2>&1
    e=$(date +%s.%N)
    echo "$label $(echo "$e - $s" | bc)"
  done
done
uptime
