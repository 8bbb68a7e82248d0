# CLI paths of the kernel-cost, loaded-RTT and goodput drivers that need no GPU
# (native/bench/README.md exit codes):
#   CASE=bad_args:  an unknown flag exits 2;
#   CASE=bad_param: a bad point parameter (PARAM) is a failed point record saying "bad parameter",
#                   exit 0 (checked before any GPU is touched); with EXPECT, the record must also
#                   match that regular expression (the reason it gives);
#   CASE=no_gpu:    with no GPU visible (CUDA_VISIBLE_DEVICES empty) a valid point (VALID) exits 3 with one
#                   stderr line and writes no record.
include(${CMAKE_CURRENT_LIST_DIR}/../common/expect_hardware_missing.cmake)
file(REMOVE ${OUT})
set(common --experiment cli_check --out ${OUT} --campaign ci --host ci --platform local --run-index 0
           --provenance-id ci)
if(CASE STREQUAL "bad_args")
  execute_process(COMMAND ${BENCH} --bogus RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "expected exit 2 for a bad argument, got ${rc}: ${err}")
  endif()
elseif(CASE STREQUAL "bad_param")
  execute_process(COMMAND ${BENCH} ${common} --param ${PARAM} RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "expected exit 0 (a failed point) for --param ${PARAM}, got ${rc}: ${err}")
  endif()
  file(READ ${OUT} body)
  if(NOT body MATCHES "\"status\": \"failed\"" OR NOT body MATCHES "bad parameter")
    message(FATAL_ERROR "expected a failed record naming the bad parameter, got: ${body}")
  endif()
  if(DEFINED EXPECT AND NOT body MATCHES "${EXPECT}")
    message(FATAL_ERROR "expected the failed record to say '${EXPECT}', got: ${body}")
  endif()
elseif(CASE STREQUAL "no_gpu")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env CUDA_VISIBLE_DEVICES= ${BENCH} ${common} --param ${VALID}
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  expect_hardware_missing("${rc}" "${err}" "${OUT}" "no CUDA device" "GPU")
else()
  message(FATAL_ERROR "unknown CASE ${CASE}")
endif()
