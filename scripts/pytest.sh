#!/usr/bin/env bash
# Runs pytest from the project venv; "no tests selected" (exit 5) is not a failure here,
# every other non-zero exit is.
set -u
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest: no tests were selected"
  exit 0
fi
exit "$rc"
