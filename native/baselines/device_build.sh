# Sourced by the baselines' device scripts (device_nvlink.sh, device_nic.sh): build the baselines
# alone on the shared harness, as a small CMake project of their own, so that work in progress in
# other components cannot stop them. Uses $nvshmem and $nccl (the pip packages' folders).
#   build_baselines_alone SRC_DIR BUILD_DIR TARGET...    (from the repository root)
build_baselines_alone() {
  local src=$1 bdir=$2
  shift 2
  mkdir -p "$src"
  cat > "$src/CMakeLists.txt" <<CMK
cmake_minimum_required(VERSION 3.24)
project(gicomm_baselines_only LANGUAGES C CXX CUDA)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_ARCHITECTURES 90)
find_package(CUDAToolkit REQUIRED)
find_package(Threads REQUIRED)
enable_testing()
set(GICOMM_HAVE_CUDA ON)
set(GICOMM_HOST_WARNINGS -Wall -Wextra -Werror)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY \${CMAKE_BINARY_DIR}/bin)
add_library(gicomm_headers INTERFACE)
target_include_directories(gicomm_headers INTERFACE $PWD/native/include)
add_subdirectory($PWD/native/bench/common bench_common)
add_subdirectory($PWD/native/baselines baselines)
CMK
  cmake -S "$src" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DGICOMM_NVSHMEM_ROOT="$nvshmem" \
    -DGICOMM_NCCL_ROOT="$nccl" && cmake --build "$bdir" -j 16 --target "$@"
}
