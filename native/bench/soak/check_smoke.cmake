# soak.smoke: run gicomm-bench-soak briefly on both targets (2 producers, frequent kills) and require
# exit 0, status ok records, lost = duplicated = reordered = 0 and at least one kill per target.
file(REMOVE ${OUT})
foreach(target engine rings)
  execute_process(COMMAND ${DRIVER} --experiment soak --out ${OUT} --campaign ci --host ci --platform local
                          --provenance-id ci --param target=${target} --param duration_s=1.5 --param producers=2
                          --param qps=2 --param rings=2 --param workers=1 --param kill_every_ms=100
                          --param seed=7 --param window_ms=250 --param depth=64
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  message(STATUS "${target}: ${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gicomm-bench-soak target=${target} exited ${rc}")
  endif()
endforeach()
file(STRINGS ${OUT} lines)
set(kills_seen 0)
foreach(line IN LISTS lines)
  string(JSON status GET "${line}" status)
  string(JSON metric GET "${line}" metric)
  if(NOT status STREQUAL "ok")
    string(JSON error GET "${line}" error)
    message(FATAL_ERROR "record ${metric} is ${status}: ${error}")
  endif()
  string(JSON v GET "${line}" stats p50)
  if(metric MATCHES "^(lost|duplicated|reordered|misdirected)$" AND NOT v EQUAL 0)
    message(FATAL_ERROR "${metric} = ${v}")
  endif()
  if(metric STREQUAL "kills" AND v GREATER 0)
    math(EXPR kills_seen "${kills_seen} + 1")
  endif()
endforeach()
if(NOT kills_seen EQUAL 2)
  message(FATAL_ERROR "expected kills on both targets, got ${kills_seen} target(s) with kills")
endif()
