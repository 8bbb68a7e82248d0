# shellcheck shell=bash
# Sourced by the device scripts (native/tests/softnic/device_check.sh, tools/device-ceiling.sh,
# tools/doctor-device.sh, native/emu/tools/device-check.sh, native/emu/tools/nvshmem-device-check.sh):
# bounded, logged steps. The caller sets TOTAL_S (the whole script's bound), START (its start, in epoch seconds)
# and LOGS (a folder for the step logs), and where it wants them:
#   STEPS            a steps.tsv with its header: one line per step (name, exit, seconds)
#   SUMMARY          a summary.txt: one PASS/FAIL/SKIP line per step
#   STEP_RESERVE_S   seconds kept free at the end of TOTAL_S (to pack the results; default 0)
#   STEP_SIGNAL      what a step that runs out of time gets first (default TERM), sent to its whole
#   STEP_KILL_AFTER  process group; KILL follows this many seconds later (default 10)
#   step_done        a function: `step_done NAME VERDICT` runs after each step (VERDICT PASS, FAIL
#                    or SKIP) to collect what the step printed or count failures
# step NAME LIMIT_S [--expect RC] CMD...: runs CMD with a timeout (never past the total bound),
# logs to $LOGS/NAME.log; PASS when it exits RC (default 0) before its timeout. Returns the
# command's exit code (124 when it timed out or was not started).
step() {
  local name=$1 limit=$2 want=0
  shift 2
  if [ "${1-}" = --expect ]; then
    want=$2
    shift 2
  fi
  local left=$((TOTAL_S - ${STEP_RESERVE_S:-0} - ($(date +%s) - START)))
  if [ "$left" -lt 10 ]; then
    [ -n "${STEPS-}" ] && printf '%s\tskipped (total bound %ss reached)\t0\n' "$name" "$TOTAL_S" >> "$STEPS"
    _step_line "SKIP $name: deadline reached (total bound ${TOTAL_S} s)"
    ! declare -F step_done > /dev/null || step_done "$name" SKIP
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0 rc secs verdict=PASS late=""
  t0=$(date +%s)
  timeout -s "${STEP_SIGNAL:-TERM}" -k "${STEP_KILL_AFTER:-10}" "$limit" "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  secs=$(($(date +%s) - t0))
  # timeout exits 124 when the step ran out of time, 137 when it had to be killed as well.
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    late=", timed out after $limit s"
  fi
  if [ "$rc" -ne "$want" ] || [ -n "$late" ]; then
    verdict=FAIL
  fi
  [ -n "${STEPS-}" ] && printf '%s\t%s\t%s\n' "$name" "$rc" "$secs" >> "$STEPS"
  _step_line "$verdict $name: exit $rc (expected $want)$late in $secs s"
  ! declare -F step_done > /dev/null || step_done "$name" "$verdict"
  return $rc
}

_step_line() {
  if [ -n "${SUMMARY-}" ]; then
    echo "$1" | tee -a "$SUMMARY"
  else
    echo "== $1"
  fi
}
