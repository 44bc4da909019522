# Sourced by scenarios (testbed/run ships it as ./case.sh): one way to run
# a case so that a case that hangs costs its own time limit, not the whole
# session, and the serial log says how far a scenario got.
#
#   case_ NAME CMD [ARG]...   CMD's stdout, stderr and exit code land in
#                             $MCPVM_OUT/NAME.out, .err and .rc
#   CASE_LIMIT=SECS           per-case limit (default 300); on expiry the
#                             case's whole session is killed and .rc is 124
#   CASE_TEE=1                the case's stderr lines also go to the
#                             serial log as they come (long cases)
#   progress TEXT             a line in the serial log (nested) or on stderr

progress() {
  if [ "${MCPVM_TESTBED:-}" = nested ]; then
    echo "MCPVM-TESTBED: $*" > /dev/console
  else
    echo "testbed: $*" >&2
  fi
}

case_() {
  name=$1; shift
  limit=${CASE_LIMIT:-300}
  progress "case $name (limit ${limit}s)"
  started=$(date +%s)
  # Its own session, so the limit reaches every process the case started
  # (pipelines inside sh -c, VMMs, their children). Background jobs of a
  # script read /dev/null unless told otherwise, which every case expects.
  err=$MCPVM_OUT/$name.err tee_pid=
  if [ -n "${CASE_TEE:-}" ]; then
    err=$MCPVM_OUT/.$name.fifo
    rm -f "$err"; mkfifo "$err"
    (while IFS= read -r l; do echo "$l"; progress "$name: $l"; done < "$err" > "$MCPVM_OUT/$name.err") &
    tee_pid=$!
  fi
  setsid "$@" > "$MCPVM_OUT/$name.out" 2> "$err" &
  pid=$!
  rm -f "$MCPVM_OUT/$name.expired"
  (sleep "$limit"; : > "$MCPVM_OUT/$name.expired"; kill -KILL "-$pid") > /dev/null 2>&1 &
  watchdog=$!
  wait "$pid"
  rc=$?
  kill "$watchdog" 2>/dev/null
  if [ -n "$tee_pid" ]; then wait "$tee_pid"; rm -f "$err"; fi
  if [ -e "$MCPVM_OUT/$name.expired" ]; then
    rm -f "$MCPVM_OUT/$name.expired"
    rc=124
    echo "case $name: killed after its ${limit}s limit" >> "$MCPVM_OUT/$name.err"
  fi
  echo "$rc" > "$MCPVM_OUT/$name.rc"
  progress "case $name: exit $rc after $(($(date +%s) - started))s"
}
