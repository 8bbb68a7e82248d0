# Command-line checks of the drivers (native/bench/README.md exit codes), run as cmake -P scripts
# by ctest: -DCASE=... -DBENCH=<driver> -DOUT=<records file> [-DEXPERIMENT=...] [-DPARAM=key=value]
# [-DVALID=key=value] [-DEXPECT=regex] [-DFLAGS=...]
#   bad_args       an unknown flag exits 2
#   bad_param      a bad point parameter (PARAM) is a failed record saying "bad parameter" (and
#                  EXPECT), exit 0, before any GPU is touched
#   no_gpu         with no GPU visible (CUDA_VISIBLE_DEVICES empty) a valid point (VALID) exits 3
#                  with one stderr line matching EXPECT and writes no record
#   engine_rounds  the engine honours --warmup and --iters: one sample per timed round
#   soak_smoke     a short soak of both targets (2 producers, frequent kills): exit 0, status ok,
#                  lost = duplicated = reordered = misdirected = 0, and kills on both targets
file(REMOVE ${OUT})
if(NOT DEFINED EXPERIMENT)
  set(EXPERIMENT cli_check)
endif()
set(common --experiment ${EXPERIMENT} --out ${OUT} --campaign ci --host ci --platform local --run-index 0
           --provenance-id ci)

# exit 3, one line on stderr matching `pattern`, no record
function(expect_hardware_missing rc err pattern)
  string(STRIP "${err}" err)
  if(NOT rc EQUAL 3)
    message(FATAL_ERROR "expected exit 3 with the hardware missing, got ${rc}: ${err}")
  endif()
  if(NOT err MATCHES "${pattern}" OR err MATCHES "\n")
    message(FATAL_ERROR "expected one line matching '${pattern}', got: ${err}")
  endif()
  if(EXISTS ${OUT})
    file(READ ${OUT} body)
    if(NOT body STREQUAL "")
      message(FATAL_ERROR "no record may be written when the hardware is missing: ${body}")
    endif()
  endif()
endfunction()

if(CASE STREQUAL "bad_args")
  execute_process(COMMAND ${BENCH} --bogus RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "expected exit 2 for a bad argument, got ${rc}: ${err}")
  endif()
elseif(CASE STREQUAL "bad_param")
  execute_process(COMMAND ${BENCH} ${common} --param ${PARAM} ${FLAGS} RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "expected exit 0 (a failed point) for --param ${PARAM}, got ${rc}: ${err}")
  endif()
  file(READ ${OUT} body)
  string(JSON status GET "${body}" status)
  string(JSON error GET "${body}" error)
  if(NOT status STREQUAL "failed" OR NOT error MATCHES "bad parameter")
    message(FATAL_ERROR "expected a failed record naming the bad parameter, got: ${body}")
  endif()
  if(DEFINED EXPECT AND NOT error MATCHES "${EXPECT}")
    message(FATAL_ERROR "expected the failed record to say '${EXPECT}', got: ${error}")
  endif()
elseif(CASE STREQUAL "no_gpu")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env CUDA_VISIBLE_DEVICES= ${BENCH} ${common} --param ${VALID} ${FLAGS}
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  expect_hardware_missing("${rc}" "${err}" "${EXPECT}")
elseif(CASE STREQUAL "hardware_missing")
  # Where the hardware exists the case is not meaningful and passes.
  file(GLOB devs /sys/class/infiniband/*)
  if(devs)
    return()
  endif()
  execute_process(COMMAND ${BENCH} ${common} --param ${VALID} ${FLAGS} RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  expect_hardware_missing("${rc}" "${err}" "${EXPECT}")
elseif(CASE STREQUAL "engine_rounds")
  foreach(rounds "2;3" "0;1")
    list(GET rounds 0 warmup)
    list(GET rounds 1 iters)
    file(REMOVE ${OUT})
    execute_process(COMMAND ${BENCH} --experiment engine_ceiling --out ${OUT} --campaign ci --host ci --platform local
                            --provenance-id ci --param engine=cpu --param qps=4 --param depth=256
                            --warmup ${warmup} --iters ${iters}
                    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
    file(READ ${OUT} body)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "engine exited ${rc}: ${err}")
    endif()
    string(JSON status GET "${body}" status)
    if(NOT status STREQUAL "ok")
      message(FATAL_ERROR "engine point not ok: ${body}")
    endif()
    string(JSON n GET "${body}" stats n)
    if(NOT n EQUAL iters)
      message(FATAL_ERROR "--iters ${iters} gave ${n} samples: ${body}")
    endif()
  endforeach()
elseif(CASE STREQUAL "soak_smoke")
  foreach(target engine rings)
    execute_process(COMMAND ${BENCH} --experiment soak --out ${OUT} --campaign ci --host ci --platform local
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
else()
  message(FATAL_ERROR "unknown CASE ${CASE}")
endif()
