#!/bin/sh
# capture.sh HARNESS OUT EXTRA PYTHON SCRIPT... - run SCRIPT (it prints the
# FUZZ_CAPTURE numbers and stops itself), capture a seed from it, end it.
# EXTRA "asyncio": the address of the process's .AsyncioDebug table.
set -e
h=$1 out=$2 extra=$3; shift 3
"$@" > /tmp/capture.$$ &
while [ ! -s /tmp/capture.$$ ]; do sleep 0.1; done
sleep 0.3
read pid minor rt code coro agen < /tmp/capture.$$
[ "$extra" = asyncio ] && extra=$(python3 "$(dirname "$0")/asyncio_tables.py" --addr "$pid")
FUZZ_CAPTURE="$pid $minor $rt $code $coro $agen $extra $out" $h || rc=$?
kill -CONT "$pid"; wait; rm -f /tmp/capture.$$
exit ${rc:-0}
