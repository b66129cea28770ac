#!/bin/sh
# The Python client (clients/python, from the source tree) run by real
# worker processes (tests/clients/worker.py) against a real `tasker serve`
# on a SQLite store: tests/clients/lib.sh says what is checked.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/config.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null 2>&1 ||
  { tap_fail "python3 is installed" "make test installs Debian's python3 (make server-deps)"; tap_done; exit 1; }
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
  { tap_fail "python3 is 3.11 or newer" "$(python3 --version 2>&1)"; tap_done; exit 1; }
PYTHONPATH=$HERE/../../clients/python
export PYTHONPATH
sqlite_store
tasker_config $QUICK_RETRIES engine.lease=3s engine.heartbeat=1s
. "$(dirname "$0")/../lib/workers.sh"
. "$HERE/lib.sh"
cl_worker_exec() { exec python3 "$HERE/worker.py" "$2" "$3" "$1" "$4" "$5"; }
cl_example_exec() { exec python3 "$TK_TOP/examples/workers/worker.py" "$1"; }
CL_BOOM_ERROR="ValueError: kaput"
cl_run
tap_done
