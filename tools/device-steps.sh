# Sourced by the device scripts (native/tests/softnic/device_check.sh, tools/device-ceiling.sh):
# bounded, logged steps. The caller sets TOTAL_S (the whole script's bound), START (its start, in
# epoch seconds), LOGS (a folder for the step logs) and STEPS (a steps.tsv with its header).
# step NAME LIMIT_S CMD...: runs CMD with a timeout (never past the total bound), logs to NAME.log.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((TOTAL_S - ($(date +%s) - START)))
  if [ "$left" -lt 10 ]; then
    printf '%s\tskipped (total bound %ss reached)\t0\n' "$name" "$TOTAL_S" >> "$STEPS"
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0 rc
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" >> "$STEPS"
  echo "== $name: exit $rc ($(($(date +%s) - t0)) s)"
  return $rc
}
