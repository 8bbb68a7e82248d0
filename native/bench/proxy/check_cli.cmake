# CLI failure paths of gicomm-bench-proxy that need no GPU or NIC (native/bench/README.md exit codes):
#   CASE=bad_args: an unknown flag exits 2;
#   CASE=verbs_missing: --nic-backend verbs where no RDMA device exists exits 3 with one stderr line
#   naming the missing device (checked before the GPU is touched). Where an RDMA device exists the
#   second case is not meaningful and passes.
include(${CMAKE_CURRENT_LIST_DIR}/../common/expect_hardware_missing.cmake)
file(REMOVE ${OUT})
if(CASE STREQUAL "bad_args")
  execute_process(COMMAND ${BENCH} --bogus RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "expected exit 2 for a bad argument, got ${rc}: ${err}")
  endif()
  return()
endif()
execute_process(
  COMMAND ${BENCH} --experiment proxy_smoke --out ${OUT} --campaign ci --host ci --platform local
          --run-index 0 --provenance-id ci --nic-backend verbs --param mode=issue
  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
file(GLOB devs /sys/class/infiniband/*)
if(devs)
  message(STATUS "RDMA devices present (${devs}); exit ${rc}")
  return()
endif()
expect_hardware_missing("${rc}" "${err}" "${OUT}" "no RDMA device found" "RDMA device")
string(STRIP "${err}" err)
message(STATUS "ok: exit 3, '${err}'")
