// Shared compile-time helpers for code that runs on the host and on the GPU.
//
// GICOMM_HD marks functions that are compiled for both sides, so the CPU tests exercise exactly the
// code the GPU runs. Byte-order helpers are explicit (mlx5 formats are big-endian on the wire and
// in memory, the host and the GPU are little-endian).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GICOMM_HD __host__ __device__ __forceinline__
#define GICOMM_DEVICE __device__ __forceinline__
#else
#define GICOMM_HD inline
#endif

namespace gicomm {

GICOMM_HD uint16_t bswap16(uint16_t v) { return static_cast<uint16_t>((v >> 8) | (v << 8)); }

GICOMM_HD uint32_t bswap32(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(v, 0, 0x0123);
#else
  return __builtin_bswap32(v);
#endif
}

GICOMM_HD uint64_t bswap64(uint64_t v) {
#if defined(__CUDA_ARCH__)
  const uint32_t lo = static_cast<uint32_t>(v);
  const uint32_t hi = static_cast<uint32_t>(v >> 32);
  return (static_cast<uint64_t>(bswap32(lo)) << 32) | bswap32(hi);
#else
  return __builtin_bswap64(v);
#endif
}

// Host (and GPU) order <-> big-endian. Both sides we build for are little-endian.
GICOMM_HD uint16_t to_be16(uint16_t v) { return bswap16(v); }
GICOMM_HD uint32_t to_be32(uint32_t v) { return bswap32(v); }
GICOMM_HD uint64_t to_be64(uint64_t v) { return bswap64(v); }
GICOMM_HD uint16_t from_be16(uint16_t v) { return bswap16(v); }
GICOMM_HD uint32_t from_be32(uint32_t v) { return bswap32(v); }
GICOMM_HD uint64_t from_be64(uint64_t v) { return bswap64(v); }

// Wrap-aware comparison of 16-bit ring counters: true when a is at or after b.
GICOMM_HD bool idx16_at_or_after(uint16_t a, uint16_t b) {
  return static_cast<int16_t>(static_cast<uint16_t>(a - b)) >= 0;
}

}  // namespace gicomm
