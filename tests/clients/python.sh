#!/bin/sh
# The Python client (clients/python, from the source tree) run by real
# worker processes (tests/clients/worker.py) against a real `tasker serve`
# on a SQLite store: tests/clients/lib/clients.sh says what is checked.
. "$(dirname "$0")/lib/clients.sh"
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  tap_fail "python3 3.11 or newer is installed" "$(python3 --version 2>&1)" \
    "make test installs Debian's python3 (make server-deps)"
  tap_done
  exit 1
fi
PYTHONPATH=$TK_TOP/clients/python
export PYTHONPATH
cl_worker_exec() { exec python3 "$HERE/worker.py" "$2" "$3" "$1" "$4" "$5"; }
cl_example_exec() { exec python3 "$TK_TOP/examples/workers/worker.py" "$1"; }
CL_BOOM_ERROR="ValueError: kaput"
cl_run
tap_done
