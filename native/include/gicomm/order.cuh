// Memory-ordering variants of the doorbell sequence (the paper's Table 4) as compile-time policies.
//
// Every variant orders the same three steps of a post: (1) the WQE stores, (2) the doorbell-record
// store (BE16 producer index), (3) the 8-byte doorbell store. A policy provides
//   before_dbrec()       between (1) and (2)
//   store_dbrec(p, v)    step (2)
//   before_doorbell()    between (2) and (3)
//   store_doorbell(p, v) step (3)
// Policies (name: what is emitted; who does this):
//   None          plain relaxed stores, no fence (unsafe control)
//   GpuFence      fence.acq_rel.gpu before the doorbell (DOCA GPUNetIO / GDAKI default)
//   FencedDbrec   GpuFence plus the same fence before the dbrec
//   GpuRelease    st.release.gpu for dbrec and doorbell (DeepEP ibgda_device.cuh)
//   ThreadFence   __threadfence() before dbrec and before doorbell (NVSHMEM IBGDA_MEMBAR)
//   SysRelease    st.release.sys for dbrec and doorbell
//   SysFence      fence.sc.sys (__threadfence_system) before the doorbell
// The doorbell store in the fence variants is a relaxed system-scope 64-bit store: on a real UAR
// page it would be st.mmio.relaxed.sys; the softnic doorbell is ordinary (peer or pinned) memory,
// for which st.relaxed.sys is the same instruction class without the MMIO qualifier.
#pragma once

#include <cstdint>

namespace gicomm::order {

#if defined(__CUDACC__)
__device__ __forceinline__ void st_relaxed_sys_u32(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys_u64(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_release_gpu_u32(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_release_gpu_u64(uint64_t* p, uint64_t v) {
  asm volatile("st.release.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_release_sys_u32(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_release_sys_u64(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// An atomic add with release semantics at system scope: every write ordered before it (the
// thread's own, and others' through a barrier) is visible before the add; no acquire half.
__device__ __forceinline__ void red_release_sys_add_u32(uint32_t* p, uint32_t v) {
  asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// Counts within a block (generic addresses: shared memory): a warp's count of work done, released
// to the warp that acts on it (the add that returns the count before it also acquires the other
// warps' releases), and a warp's acquire of such a count.
__device__ __forceinline__ uint32_t atom_acq_rel_cta_add_u32(uint32_t* p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.cta.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ uint32_t ld_acquire_cta_u32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.cta.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void compiler_barrier() { asm volatile("" ::: "memory"); }

__device__ __forceinline__ uint32_t ld_relaxed_sys_u32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_relaxed_sys_u64(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_acquire_sys_u32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct None {
  static constexpr const char* name = "none";
  __device__ static void before_dbrec() { compiler_barrier(); }
  __device__ static void store_dbrec(uint32_t* p, uint32_t v) { st_relaxed_sys_u32(p, v); }
  __device__ static void before_doorbell() { compiler_barrier(); }
  __device__ static void store_doorbell(uint64_t* p, uint64_t v) { st_relaxed_sys_u64(p, v); }
};
struct GpuFence {
  static constexpr const char* name = "gpu_fence";
  __device__ static void before_dbrec() { compiler_barrier(); }
  __device__ static void store_dbrec(uint32_t* p, uint32_t v) { st_relaxed_sys_u32(p, v); }
  __device__ static void before_doorbell() { fence_acq_rel_gpu(); }
  __device__ static void store_doorbell(uint64_t* p, uint64_t v) { st_relaxed_sys_u64(p, v); }
};
struct FencedDbrec {
  static constexpr const char* name = "fenced_dbrec";
  __device__ static void before_dbrec() { fence_acq_rel_gpu(); }
  __device__ static void store_dbrec(uint32_t* p, uint32_t v) { st_relaxed_sys_u32(p, v); }
  __device__ static void before_doorbell() { fence_acq_rel_gpu(); }
  __device__ static void store_doorbell(uint64_t* p, uint64_t v) { st_relaxed_sys_u64(p, v); }
};
struct GpuRelease {
  static constexpr const char* name = "gpu_release";
  __device__ static void before_dbrec() { compiler_barrier(); }
  __device__ static void store_dbrec(uint32_t* p, uint32_t v) { st_release_gpu_u32(p, v); }
  __device__ static void before_doorbell() { compiler_barrier(); }
  __device__ static void store_doorbell(uint64_t* p, uint64_t v) { st_release_gpu_u64(p, v); }
};
struct ThreadFence {
  static constexpr const char* name = "threadfence";
  __device__ static void before_dbrec() { __threadfence(); }
  __device__ static void store_dbrec(uint32_t* p, uint32_t v) { st_relaxed_sys_u32(p, v); }
  __device__ static void before_doorbell() { __threadfence(); }
  __device__ static void store_doorbell(uint64_t* p, uint64_t v) { st_relaxed_sys_u64(p, v); }
};
struct SysRelease {
  static constexpr const char* name = "sys_release";
  __device__ static void before_dbrec() { compiler_barrier(); }
  __device__ static void store_dbrec(uint32_t* p, uint32_t v) { st_release_sys_u32(p, v); }
  __device__ static void before_doorbell() { compiler_barrier(); }
  __device__ static void store_doorbell(uint64_t* p, uint64_t v) { st_release_sys_u64(p, v); }
};
struct SysFence {
  static constexpr const char* name = "sys_fence";
  __device__ static void before_dbrec() { compiler_barrier(); }
  __device__ static void store_dbrec(uint32_t* p, uint32_t v) { st_relaxed_sys_u32(p, v); }
  __device__ static void before_doorbell() { __threadfence_system(); }
  __device__ static void store_doorbell(uint64_t* p, uint64_t v) { st_relaxed_sys_u64(p, v); }
};
#endif  // __CUDACC__

// Runtime names, in the paper's Table 4 order, for drivers and records.
enum class Variant : int { none, gpu_fence, fenced_dbrec, gpu_release, threadfence, sys_release, sys_fence };
constexpr int kNumVariants = 7;
inline const char* variant_name(Variant v) {
  constexpr const char* names[] = {"none", "gpu_fence", "fenced_dbrec", "gpu_release", "threadfence", "sys_release",
                                   "sys_fence"};
  return names[static_cast<int>(v)];
}
inline bool variant_from_name(const char* s, Variant* out) {
  for (int i = 0; i < kNumVariants; ++i) {
    const char* n = variant_name(static_cast<Variant>(i));
    int k = 0;
    while (n[k] && s[k] == n[k]) ++k;
    if (n[k] == 0 && s[k] == 0) {
      *out = static_cast<Variant>(i);
      return true;
    }
  }
  return false;
}

// Calls f.template operator()<Policy>() for the runtime variant (drivers dispatch once per point).
#if defined(__CUDACC__)
template <class F>
auto dispatch(Variant v, F&& f) {
  switch (v) {
    case Variant::none: return f(None{});
    case Variant::gpu_fence: return f(GpuFence{});
    case Variant::fenced_dbrec: return f(FencedDbrec{});
    case Variant::gpu_release: return f(GpuRelease{});
    case Variant::threadfence: return f(ThreadFence{});
    case Variant::sys_release: return f(SysRelease{});
    case Variant::sys_fence: break;
  }
  return f(SysFence{});
}
#endif

}  // namespace gicomm::order
