#!/usr/bin/env bash
# Thin wrapper: bench/run.sh [--pairs N] [--workload javac|lucene|javac-big|all]
#                            [--agent-opts 'start,event=cpu,interval=10ms'] [--label NAME] ...
# See bench/run.py --help.
exec python3 "$(dirname "${BASH_SOURCE[0]}")/run.py" "$@"
