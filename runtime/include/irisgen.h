// irisgen.h: the portable device header of irisgen's generated kernels.
//
// One source, two platforms: on AMD it sits on HIP (clang's __hip_atomic_*
// builtins with explicit memory scopes, wavefront 64); on NVIDIA it sits on
// CUDA (PTX with .sys scope, warp 32). HIP's host headers are not used on
// NVIDIA: they do not build against CUDA 13 (see docs/gpu-machines.md).
//
// It gives the kernels: the ABI structs (docs/internals.md), address
// translation between ranks, 16-byte vector loads and stores, fp32
// accumulation helpers for f16/bf16, release/acquire flag operations with
// system scope, a global nanosecond timer, and the per-block device barrier
// with monotonic epochs and a time limit.
//
// Templates never touch tensors through this header directly: they get typed
// pointers from the generator's helpers (docs/templates.md), which record the
// access for the cross-check against the spec.
#ifndef IRISGEN_H
#define IRISGEN_H

#if defined(IRISGEN_CUDA) || defined(__CUDACC__)
#ifndef IRISGEN_CUDA
#define IRISGEN_CUDA 1
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#define IRISGEN_GRID_CONSTANT __grid_constant__
#else
#define IRISGEN_HIP 1
#include <hip/hip_runtime.h>
#include <stdint.h>
#define IRISGEN_GRID_CONSTANT
#endif

#define IRISGEN_MAX_WORLD 8
#define IRISGEN_DEV __device__ __forceinline__

// ---------------------------------------------------------------- ABI ----

// irisgen_ctx is the first member of every kernel's argument struct; the Go
// runtime packs it (runtime/rank.go). 112 bytes, every field 8-byte aligned.
typedef struct {
  uint64_t base[IRISGEN_MAX_WORLD];  // heap base of every rank, as mapped on this device; 0 past world
  uint64_t flags;       // this plan's barrier flags on this rank's heap: uint64[blocks+1][IRISGEN_MAX_WORLD] (the last row: grid_sync)
  uint64_t epochs;      // this plan's per-block epoch counters on this rank's heap: uint64[blocks+2] (the last two: grid_sync)
  uint64_t err;         // this rank's two irisgen_error records (host-mapped): [0] world, [1] call
  uint32_t timeout_us;  // limit of every spin, in microseconds
  uint32_t launch;      // the launch's number among its rank's launches (1, 2, ...); 0: a kernel that never meets its peers
  int32_t rank;
  int32_t world;
  int32_t barrier;  // 1: the kernel runs its device barriers (mode device); 0: host or none
  uint32_t check;   // the launch's fingerprint: a hash of its number, plan, parameters and barrier mode
} irisgen_ctx;

// Every heap (a group's too) starts with a control block
// (irisgen::detail::control, below), which the runtime reserves and zeroes.
#define IRISGEN_RING 32

// irisgen_error is the error record a kernel fills when it gives up; the host
// reads it after the stream (irisrt.Rank.Check). A rank has two: record 0
// takes errors that leave the world's barrier state out of step (a timeout:
// sticky, every later spin gives up at once, the world must be restarted),
// record 1 errors that fail only the call (an index out of range, a
// capacity exceeded: the kernel goes on and meets its peers; the host
// reports it once).
typedef struct {
  uint32_t code;  // 0 none, 1 barrier timeout, 2 index out of range, 3 capacity exceeded, 4 mismatch, 5 peer refused
  uint32_t rank;  // rank that saw it
  uint32_t peer;  // peer that did not arrive
  uint32_t block;
  uint64_t epoch;  // epoch waited for; the launch number (4); this rank's heap base (5)
  uint64_t info;   // code-specific: (peer's check << 32) | check (4); (launch << 32) | reason (5)
} irisgen_error;

#define IRISGEN_ERR_TIMEOUT 1u
#define IRISGEN_ERR_INDEX 2u
#define IRISGEN_ERR_CAPACITY 3u
#define IRISGEN_ERR_MISMATCH 4u
#define IRISGEN_ERR_REFUSED 5u

// ---------------------------------------------------------- data types ----

// f16 and bf16 are carried as their bits; arithmetic happens in fp32.
struct irisgen_f16 {
  uint16_t bits;
};
struct irisgen_bf16 {
  uint16_t bits;
};

namespace irisgen {

IRISGEN_DEV float bits_f32(uint32_t u) {
#ifdef IRISGEN_CUDA
  return __uint_as_float(u);
#else
  return __builtin_bit_cast(float, u);
#endif
}

IRISGEN_DEV uint32_t f32_bits(float f) {
#ifdef IRISGEN_CUDA
  return __float_as_uint(f);
#else
  return __builtin_bit_cast(uint32_t, f);
#endif
}

IRISGEN_DEV float f16_to_f32(uint16_t h) {
#ifdef IRISGEN_CUDA
  return __half2float(__ushort_as_half(h));
#else
  return (float)__builtin_bit_cast(_Float16, h);
#endif
}

// Round to nearest even, like the CPU references.
IRISGEN_DEV uint16_t f32_to_f16(float f) {
#ifdef IRISGEN_CUDA
  return __half_as_ushort(__float2half_rn(f));
#else
  return __builtin_bit_cast(uint16_t, (_Float16)f);
#endif
}

IRISGEN_DEV float bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

// Round to nearest even; NaN stays a (quiet) NaN.
IRISGEN_DEV uint16_t f32_to_bf16(float f) {
#ifdef IRISGEN_CUDA
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
#endif
}

// to_f32 / from_f32: element <-> fp32 accumulator.
IRISGEN_DEV float to_f32(float x) { return x; }
IRISGEN_DEV float to_f32(irisgen_f16 x) { return f16_to_f32(x.bits); }
IRISGEN_DEV float to_f32(irisgen_bf16 x) { return bf16_to_f32(x.bits); }

template <typename T>
IRISGEN_DEV T from_f32(float f);
template <>
IRISGEN_DEV float from_f32<float>(float f) { return f; }
template <>
IRISGEN_DEV irisgen_f16 from_f32<irisgen_f16>(float f) { return irisgen_f16{f32_to_f16(f)}; }
template <>
IRISGEN_DEV irisgen_bf16 from_f32<irisgen_bf16>(float f) { return irisgen_bf16{f32_to_bf16(f)}; }

// Reduction operators on the fp32 accumulator.
struct op_sum {
  static IRISGEN_DEV float apply(float a, float b) { return a + b; }
};
struct op_max {
  static IRISGEN_DEV float apply(float a, float b) { return fmaxf(a, b); }
};
struct op_min {
  static IRISGEN_DEV float apply(float a, float b) { return fminf(a, b); }
};

// index_ptr reads a tensor that a launch may pass as int32 or int64
// (dtype: [i64, i32] in a spec; the template helper read_index): p[i] is
// the element as int64.
struct index_ptr {
  const void* p;
  int64_t width;  // element bytes: 4 or 8
  IRISGEN_DEV int64_t operator[](int64_t i) const {
    return width == 4 ? (int64_t)((const int32_t*)p)[i] : ((const int64_t*)p)[i];
  }
};

// ----------------------------------------------------------- vectors ----

// v16 is 16 bytes moved with one load or store.
#ifdef IRISGEN_CUDA
typedef uint4 v16;
IRISGEN_DEV uint32_t v16_word(const v16& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
IRISGEN_DEV void v16_set(v16& v, int i, uint32_t w) {
  if (i == 0) v.x = w;
  else if (i == 1) v.y = w;
  else if (i == 2) v.z = w;
  else v.w = w;
}
#else
typedef uint32_t v16 __attribute__((ext_vector_type(4)));
IRISGEN_DEV uint32_t v16_word(const v16& v, int i) { return v[i]; }
IRISGEN_DEV void v16_set(v16& v, int i, uint32_t w) { v[i] = w; }
#endif

// vec<T>::N elements of T fill one v16.
template <typename T>
struct vec {
  static constexpr int N = 16 / sizeof(T);
};

template <typename T>
IRISGEN_DEV v16 vload(const T* p) {
  return *reinterpret_cast<const v16*>(p);
}

template <typename T>
IRISGEN_DEV void vstore(T* p, const v16& v) {
  *reinterpret_cast<v16*>(p) = v;
}

// unpack / pack convert one v16 of T to and from N fp32 values.
IRISGEN_DEV void unpack(const v16& v, float* out, const float*) {
#pragma unroll
  for (int i = 0; i < 4; i++) out[i] = bits_f32(v16_word(v, i));
}
IRISGEN_DEV void unpack(const v16& v, float* out, const irisgen_f16*) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    uint32_t w = v16_word(v, i);
    out[2 * i] = f16_to_f32((uint16_t)w);
    out[2 * i + 1] = f16_to_f32((uint16_t)(w >> 16));
  }
}
IRISGEN_DEV void unpack(const v16& v, float* out, const irisgen_bf16*) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    uint32_t w = v16_word(v, i);
    out[2 * i] = bits_f32(w << 16);
    out[2 * i + 1] = bits_f32(w & 0xffff0000u);
  }
}
template <typename T>
IRISGEN_DEV void unpack(const v16& v, float (&out)[vec<T>::N]) {
  unpack(v, out, (const T*)nullptr);
}

IRISGEN_DEV v16 pack(const float* in, const float*) {
  v16 v;
#pragma unroll
  for (int i = 0; i < 4; i++) v16_set(v, i, f32_bits(in[i]));
  return v;
}
IRISGEN_DEV v16 pack(const float* in, const irisgen_f16*) {
  v16 v;
#pragma unroll
  for (int i = 0; i < 4; i++) v16_set(v, i, (uint32_t)f32_to_f16(in[2 * i]) | ((uint32_t)f32_to_f16(in[2 * i + 1]) << 16));
  return v;
}
IRISGEN_DEV v16 pack(const float* in, const irisgen_bf16*) {
  v16 v;
#pragma unroll
  for (int i = 0; i < 4; i++) v16_set(v, i, (uint32_t)f32_to_bf16(in[2 * i]) | ((uint32_t)f32_to_bf16(in[2 * i + 1]) << 16));
  return v;
}
template <typename T>
IRISGEN_DEV v16 pack(const float (&in)[vec<T>::N]) {
  return pack(in, (const T*)nullptr);
}

// aligned16 reports whether p is 16-byte aligned.
IRISGEN_DEV bool aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// head_elems is how many elements of T precede the first 16-byte boundary at
// or after p (p is T-aligned).
template <typename T>
IRISGEN_DEV int64_t head_elems(const T* p) {
  return (int64_t)(((16 - ((uintptr_t)p & 15)) & 15) / sizeof(T));
}

// Span splits [0, n) for 16-byte vector access through pointers that share
// their alignment modulo 16 (same_align): elements [0, head) one by one,
// vectors [head, head + vecs*N), elements [tail, n) one by one. When the
// pointers do not share their alignment every element takes the scalar path
// (vecs == 0, head == n): correct for any address, slower.
template <typename T>
struct span {
  int64_t head, vecs, tail;
  IRISGEN_DEV span(const T* p, int64_t n, bool same_align) {
    if (!same_align) {
      head = n;
      vecs = 0;
      tail = n;
      return;
    }
    head = head_elems(p);
    if (head > n) head = n;
    vecs = (n - head) / vec<T>::N;
    tail = head + vecs * vec<T>::N;
  }
};

// same_align reports whether a and b are equally aligned modulo 16.
IRISGEN_DEV bool same_align(const void* a, const void* b) { return (((uintptr_t)a ^ (uintptr_t)b) & 15) == 0; }

// ---------------------------------------------------------- threads ----

IRISGEN_DEV int64_t thread_id() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
IRISGEN_DEV int64_t thread_count() { return (int64_t)gridDim.x * blockDim.x; }

// ------------------------------------------------------ translation ----

// detail holds what templates must not name (the generator refuses
// irisgen::detail in a rendered template): peer pointers come from the
// peer_* helpers, which record the access.
namespace detail {
// peer_ptr translates p, an address on this rank's heap, to the same object
// on peer's heap: base[peer] + (p - base[rank]). 64-bit arithmetic throughout.
template <typename T>
IRISGEN_DEV T* peer_ptr(const irisgen_ctx& c, T* p, int peer) {
  return (T*)(c.base[peer] + ((uint64_t)(uintptr_t)p - c.base[c.rank]));
}
}  // namespace detail

// ------------------------------------------------- atomics and fences ----
// All flag operations are system scope: the flags live in heap memory that
// other GPUs read and write over the interconnect.

IRISGEN_DEV uint64_t load_acquire(const uint64_t* p) {
#ifdef IRISGEN_CUDA
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
#endif
}

IRISGEN_DEV uint64_t load_relaxed(const uint64_t* p) {
#ifdef IRISGEN_CUDA
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#endif
}

IRISGEN_DEV void store_release(uint64_t* p, uint64_t v) {
#ifdef IRISGEN_CUDA
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
#endif
}

IRISGEN_DEV uint64_t fetch_add(uint64_t* p, uint64_t v) {
#ifdef IRISGEN_CUDA
  uint64_t old;
  asm volatile("atom.acq_rel.sys.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
#else
  return __hip_atomic_fetch_add(p, v, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_SYSTEM);
#endif
}

// atomic_add_local adds v to a counter only this GPU updates; returns the old
// value (device scope, relaxed: counters, not flags).
IRISGEN_DEV uint64_t atomic_add_local(uint64_t* p, uint64_t v) {
#ifdef IRISGEN_CUDA
  return atomicAdd((unsigned long long*)p, (unsigned long long)v);
#else
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#endif
}

IRISGEN_DEV uint32_t cas32(uint32_t* p, uint32_t expect, uint32_t want) {
#ifdef IRISGEN_CUDA
  uint32_t old;
  asm volatile("atom.acq_rel.sys.global.cas.b32 %0, [%1], %2, %3;" : "=r"(old) : "l"(p), "r"(expect), "r"(want) : "memory");
  return old;
#else
  __hip_atomic_compare_exchange_strong(p, &expect, want, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  return expect;
#endif
}

// cas32_local is cas32 at device scope, for words only this GPU updates in
// memory that may be host-mapped (the error records): a system-scoped
// atomic there needs host-native atomics, which a PCIe-attached GPU lacks
// (compute-sanitizer's memcheck stops the kernel on one).
IRISGEN_DEV uint32_t cas32_local(uint32_t* p, uint32_t expect, uint32_t want) {
#ifdef IRISGEN_CUDA
  uint32_t old;
  asm volatile("atom.acq_rel.gpu.global.cas.b32 %0, [%1], %2, %3;" : "=r"(old) : "l"(p), "r"(expect), "r"(want) : "memory");
  return old;
#else
  __hip_atomic_compare_exchange_strong(p, &expect, want, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
  return expect;
#endif
}

IRISGEN_DEV uint64_t cas64(uint64_t* p, uint64_t expect, uint64_t want) {
#ifdef IRISGEN_CUDA
  uint64_t old;
  asm volatile("atom.acq_rel.sys.global.cas.b64 %0, [%1], %2, %3;" : "=l"(old) : "l"(p), "l"(expect), "l"(want) : "memory");
  return old;
#else
  __hip_atomic_compare_exchange_strong(p, &expect, want, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  return expect;
#endif
}

IRISGEN_DEV void fence_release() {
#ifdef IRISGEN_CUDA
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#else
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "");
#endif
}

IRISGEN_DEV void fence_acquire() {
#ifdef IRISGEN_CUDA
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#else
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "");
#endif
}

// ------------------------------------------------------------- timer ----

// now_ns is a global clock in nanoseconds, comparable across the blocks of a
// device (used only for the time limits of spins).
IRISGEN_DEV uint64_t now_ns() {
#ifdef IRISGEN_CUDA
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  // s_memrealtime counts at a constant 100 MHz on gfx90a and gfx94x.
  return __builtin_amdgcn_s_memrealtime() * 10;
#endif
}

// ---------------------------------------------------------- errors ----

// fail records the first error of its record (later ones are dropped: the
// first is the cause): an index out of range or a capacity exceeded in
// record 1 (a call fault), the others in record 0 (a world fault).
IRISGEN_DEV void fail(const irisgen_ctx& c, uint32_t code, uint32_t peer, uint64_t epoch, uint64_t info) {
  irisgen_error* e = (irisgen_error*)c.err + (code == IRISGEN_ERR_INDEX || code == IRISGEN_ERR_CAPACITY ? 1 : 0);
  if (cas32_local(&e->code, 0, 0xffffffffu) == 0) {
    e->rank = (uint32_t)c.rank;
    e->peer = peer;
    e->block = blockIdx.x;
    e->epoch = epoch;
    e->info = info;
    fence_release();
    *(volatile uint32_t*)&e->code = code;
  }
}

// ----------------------------------------------------------- barrier ----

namespace detail {
// control is the control block at offset 0 of every heap. A launch's
// fingerprint (launch, check) is the same on every rank exactly when the
// ranks launched the same plan with the same parameters and mode as the
// same launch, so the kernels compare it where they meet (sync) and where
// they wait long (spin).
struct control {
  // refused[p]: rank p refused its launch `launch` on the host (written
  // there by that rank's host through its peer mapping): (reason << 32) |
  // launch. A kernel of that launch waiting for p gives up at once.
  uint64_t refused[IRISGEN_MAX_WORLD];
  // begun[n % IRISGEN_RING]: this rank began launch n: (n << 32) | check.
  uint64_t begun[IRISGEN_RING];
};
}  // namespace detail

// spin calls done() until it returns true, within the time limit (times
// `slack`); on timeout it records the error (naming peer, epoch and info)
// and returns false. Every 256 polls it also gives up at once when peer
// refused this launch on the host (its refused word in this rank's control
// block); and, after 1 ms (or half the limit), when the rank's record 0
// holds an error (this or an earlier kernel timed out: the peers are out
// of step), instead of waiting the limit again, or when peer began this
// launch with another fingerprint (it launched something else as this
// launch). Record 0 is host-mapped: when every spinning warp read it every
// 256 polls, those PCIe reads put 2 and 4 H200s into a state where whole
// cells of 1,000 back-to-back launches took 0.2-2.4 ms a call instead of
// 5-50 us (a wait long enough to read it slowed the peers' waits enough
// for them to read it too), in 13 of 174 cells of `bench -tails`, Lamport
// kernels most; reading it only in a long wait, 0 (2026-11-26, A/B in one
// run), and Lamport readers need no pause between polls any more (2-3%
// faster without).
// Every wait of the header is one; each waits for one peer (its own rank
// for the waits among its blocks), and the waits of a launch between them
// wait for every peer. The checks are two loads in the slow path, inline,
// with the one fail of before (nvcc 11.8, sm_90: an out-of-line call there
// kept more registers live, up to a spill in all_reduce_rmsnorm's Lamport
// kernel; a fail per check made the Lamport kernels half as large again;
// a reference to the ctx made every ctx access a memory load).
template <typename Done>
IRISGEN_DEV bool spin(const irisgen_ctx& c, Done done, uint32_t peer, uint64_t epoch, uint64_t info, uint64_t slack = 1) {
  if (done()) return true;
  const uint64_t t0 = now_ns();
  for (uint32_t i = 1;; i++) {
    if (done()) return true;
    if ((i & 255) == 0) {
      const uint64_t waited = now_ns() - t0, limit = slack * 1000ull * c.timeout_us;
      const bool long_wait = waited > 1000000u || 2 * waited > limit;
      if (long_wait && *(volatile uint32_t*)&((irisgen_error*)c.err)->code != 0) return false;
      uint32_t code = waited > limit ? IRISGEN_ERR_TIMEOUT : 0;
      if (c.launch != 0 && peer < (uint32_t)c.world && (int)peer != c.rank) {
        const uint64_t r = load_relaxed(&((const detail::control*)c.base[c.rank])->refused[peer]);
        if ((uint32_t)r == c.launch) {
          code = IRISGEN_ERR_REFUSED;
          epoch = c.base[c.rank];
          info = ((uint64_t)c.launch << 32) | (r >> 32);
        } else if (long_wait) {
          const uint64_t b = load_relaxed(&((const detail::control*)c.base[peer])->begun[c.launch % IRISGEN_RING]);
          if ((uint32_t)(b >> 32) == c.launch && (uint32_t)b != c.check) {
            code = IRISGEN_ERR_MISMATCH;
            epoch = c.launch;
            info = (b << 32) | c.check;
          }
        }
      }
      if (code != 0) {
        fail(c, code, peer, epoch, info);
        return false;
      }
    }
  }
}

// wait_at_least spins until the flag at p reaches e (wrap-safe).
IRISGEN_DEV bool wait_at_least(const irisgen_ctx& c, const uint64_t* p, uint64_t e, uint32_t peer, uint64_t info, uint64_t slack = 1) {
  return spin(c, [&] { return (int64_t)(load_acquire(p) - e) >= 0; }, peer, e, info, slack);
}

// block_state is a block's view of its barrier epoch, kept in shared memory
// for the duration of one kernel.
struct block_state {
  uint64_t epoch;
  uint64_t gen;  // grid_sync generation, as read at kernel entry
  int failed;
};

IRISGEN_DEV block_state& state() {
  __shared__ block_state s;
  return s;
}

// epoch is the block's barrier epoch: it grows by one at every sync or
// device-mode barrier and survives across launches of the plan, so kernels
// that sync a fixed number of times per call can use it to alternate
// double-buffered slots (e.g. epoch() & 1). A sync stores the new epoch with
// one thread after the block has met, so read it before a sync, or after
// one past a __syncthreads (reduce relay's template, after the kernel's
// start).
IRISGEN_DEV uint64_t epoch() { return state().epoch; }

// Programmatic Dependent Launch (NVIDIA sm_90+; no-ops elsewhere). The
// runtime launches every kernel as a programmatic dependent of the kernel
// before it on the stream (gpu.LaunchDependent), so a kernel may start while
// that one still runs: dep_wait returns once it has ended and its writes are
// visible, and must come before any access to memory it may write;
// dep_launch lets the next kernel start its launch (it waits in its own
// dep_wait), effective once every block of this kernel has called it.
IRISGEN_DEV void dep_wait() {
#if defined(IRISGEN_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
IRISGEN_DEV void dep_launch() {
#if defined(IRISGEN_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// begin waits for the kernel before it on the stream (every tensor, flag
// and epoch may be its output), lets the next kernel launch (it waits in
// turn, so this is safe this early, and a chain of launches stays one
// kernel ahead), and loads the block's epoch (kernel entry, emitted by the
// generator); block 0 records the launch's fingerprint in the rank's
// control block, where a peer that waits long for this rank reads it.
IRISGEN_DEV void begin(const irisgen_ctx& c) {
  dep_wait();
  dep_launch();
  if (threadIdx.x == 0) {
    state().epoch = ((const uint64_t*)c.epochs)[blockIdx.x];
    state().gen = ((const uint64_t*)c.epochs)[gridDim.x + 1];
    state().failed = 0;
    if (blockIdx.x == 0 && c.launch != 0)
      ((detail::control*)c.base[c.rank])->begun[c.launch % IRISGEN_RING] = ((uint64_t)c.launch << 32) | c.check;
  }
  __syncthreads();
}

// end stores the block's epoch back (kernel exit, emitted by the generator),
// so the next launch of the plan, eager or replayed, continues from it.
IRISGEN_DEV void end(const irisgen_ctx& c) {
  if (threadIdx.x == 0) ((uint64_t*)c.epochs)[blockIdx.x] = state().epoch;
}

// advance moves the block's epoch on by one without meeting the peers, for
// kernels that count their calls in it (every rank advances alike). The
// __syncthreads keeps it after every thread's read of epoch().
IRISGEN_DEV void advance() {
  __syncthreads();
  if (threadIdx.x == 0) state().epoch += 1;
}

// sync pairs this block with the same block on every peer: every write the
// block made before it (local or to a peer's heap) is visible to the peers'
// blocks after it, and the other way round. Epochs only grow, and waits use a
// wrap-safe >= (on the low 32 bits), so nobody ever resets a flag. Returns
// false on timeout, or when a peer's flag of this sync carries another
// launch check (a mismatch; the error record is set either way); every
// thread of the block gets the same answer. Kernels use it between their
// own internal steps, in every barrier mode.
IRISGEN_DEV bool sync(const irisgen_ctx& c) {
#ifdef IRISGEN_HIP
  // AMD: a release by one thread only waits for its own wave's stores, so
  // every thread publishes its own before the block meets.
  fence_release();
#endif
  __syncthreads();
  block_state& s = state();
  const uint64_t e = s.epoch + 1;
  const int t = threadIdx.x;
  if (t < c.world && t != c.rank) {
    uint64_t* flags = (uint64_t*)c.flags + (uint64_t)blockIdx.x * IRISGEN_MAX_WORLD;
    // A flag holds the launch's check above the epoch's low 32 bits.
    // Release is cumulative: it publishes the block's writes that the
    // __syncthreads above ordered before this thread.
    store_release(detail::peer_ptr(c, flags + c.rank, t), ((uint64_t)c.check << 32) | (uint32_t)e);
    uint64_t v = 0;
    if (!spin(c, [&] { v = load_acquire(flags + t); return (int32_t)((uint32_t)v - (uint32_t)e) >= 0; }, (uint32_t)t, e, 0)) {
      s.failed = 1;
    } else if ((uint32_t)v == (uint32_t)e && (uint32_t)(v >> 32) != c.check) {
      // The peer's flag of this very sync carries another check: it
      // launched this plan with other parameters or mode, or as another
      // launch. (Past this sync it holds a later one, compared there: of
      // two ranks, the first to pass a sync sees the other's exactly.)
      fail(c, IRISGEN_ERR_MISMATCH, (uint32_t)t, c.launch, (v & 0xffffffff00000000ull) | c.check);
      s.failed = 1;
    }
  }
  __syncthreads();
#ifdef IRISGEN_HIP
  fence_acquire();
#endif
  // Every thread read s.epoch before the __syncthreads above, and the next
  // barrier reads it only after its own first __syncthreads.
  if (t == 0) s.epoch = e;
  return !s.failed;
}

// rank_sync meets every peer once, by one thread: it publishes epoch e in
// row `gridDim.x` of the peers' flags and waits for theirs. Used by the last
// block of a grid_sync.
IRISGEN_DEV bool rank_sync(const irisgen_ctx& c, uint64_t e) {
  uint64_t* row = (uint64_t*)c.flags + (uint64_t)gridDim.x * IRISGEN_MAX_WORLD;
  for (int t = 0; t < c.world; t++)
    if (t != c.rank) store_release(detail::peer_ptr(c, row + c.rank, t), e);
  for (int t = 0; t < c.world; t++)
    if (t != c.rank && !wait_at_least(c, row + t, e, (uint32_t)t, 1)) return false;
  return true;
}

// grid_sync waits until every block of this rank's grid has arrived and,
// with cross, every block of every peer's grid too: writes before it, by
// any block of any rank, are visible to every block after it. The last block
// to arrive meets the peers (rank_sync) and releases the others, which wait
// on a generation counter; counters only grow, so no reset is needed between
// launches or replays. Every block of the grid must be resident at once:
// keep max_blocks at or below the GPU's SM (CU) count. Runs in every
// barrier mode. Returns false on timeout (error record set).
IRISGEN_DEV bool grid_sync(const irisgen_ctx& c, bool cross) {
#ifdef IRISGEN_HIP
  fence_release();
#endif
  __syncthreads();
  block_state& s = state();
  if (threadIdx.x == 0) {
    uint64_t* ctr = (uint64_t*)c.epochs + gridDim.x;  // [0] arrivals, [1] generation
    const uint64_t next = s.gen + 1;
    s.gen = next;
    if (fetch_add(&ctr[0], 1) + 1 == next * gridDim.x) {
      if (cross && !rank_sync(c, next)) s.failed = 1;
      store_release(&ctr[1], next);  // released even after a failure: the record tells the host
    } else if (!wait_at_least(c, &ctr[1], next, (uint32_t)c.rank, 2, 2)) {
      // A block of this rank never arrived. Twice the limit: when the last
      // block did arrive and waits on a missing peer, its record, which
      // names that peer, comes first.
      s.failed = 1;
    }
  }
  __syncthreads();
#ifdef IRISGEN_HIP
  fence_acquire();
#endif
  return !s.failed;
}

// grid_gen is the grid_sync generation: read before the launch's first
// grid_sync it is the same on every block and, for plans that grid_sync a
// fixed number of times a call, advances by that number every call, so
// kernels use it to alternate double-buffered state.
IRISGEN_DEV uint64_t grid_gen() { return state().gen; }

// barrier is the sync at a call's boundaries (inputs ready, outputs free, the
// call complete): it runs in barrier mode device and does nothing in modes
// host and none (ctx.barrier == 0), where the host or the caller orders the
// call against the peers.
IRISGEN_DEV bool barrier(const irisgen_ctx& c) { return !c.barrier || sync(c); }

// raise_flag publishes every store the block made before it (every thread's,
// local or to a peer's heap) with v at flag, usually a peer's: a reader that
// sees v with wait_flags sees them too. For pieces of data handed over
// within a call; values only grow (a call's epoch in the high bits), so
// nobody resets a flag.
IRISGEN_DEV void raise_flag(uint64_t* flag, uint64_t v) {
#ifdef IRISGEN_HIP
  fence_release();
#endif
  __syncthreads();
  if (threadIdx.x == 0) store_release(flag, v);
}

// wait_flags waits until flags[p] >= v for every rank p in the bit mask
// peers (thread p waits for rank p), then the block goes on together: what
// the raisers published is visible to every thread. Every thread gets the
// same answer; false on timeout (error record set: info 4).
IRISGEN_DEV bool wait_flags(const irisgen_ctx& c, const uint64_t* flags, uint32_t peers, uint64_t v) {
  block_state& s = state();
  const int t = threadIdx.x;
  if (t < c.world && ((peers >> t) & 1u) && !wait_at_least(c, flags + t, v, (uint32_t)t, 4)) s.failed = 1;
  __syncthreads();
#ifdef IRISGEN_HIP
  fence_acquire();
#endif
  return !s.failed;
}

// ------------------------------------------------------- partitions ----

// index_without is rank q's index among the ranks other than root (q !=
// root): the chunk a rooted collective gives q when the root takes none.
IRISGEN_DEV int index_without(int q, int root) { return q < root ? q : q - 1; }

// relay_of is this block's relay in the rooted relay variants: rank
// (root + 1 + blockIdx.x mod (world-1)) mod world, never the root on more
// than one rank, so the blocks' parts are dealt to the other ranks in turn
// (the root itself in a world of 1).
IRISGEN_DEV int relay_of(int root, int world) {
  return world > 1 ? (root + 1 + (int)(blockIdx.x % (world - 1))) % world : root;
}

// chunk_part is chunk c of `parts` equal chunks of [0, n), each a multiple
// of 16 bytes long except the last (two-shot, ring and other scatters).
template <typename T>
IRISGEN_DEV void chunk_part(int64_t n, int c, int parts, int64_t* lo, int64_t* hi) {
  const int64_t N = vec<T>::N;
  const int64_t per = ((n + parts - 1) / parts + N - 1) / N * N;
  int64_t a = per * c, z = a + per;
  if (a > n) a = n;
  if (z > n) z = n;
  *lo = a;
  *hi = z;
}

// block_part is block b's share of [lo, hi): contiguous, a multiple of 16
// bytes long except at the end, and the same on every rank for the same
// arguments. Kernels whose blocks meet through per-block barriers partition
// with it, so block b of every rank touches the same elements. It computes
// the share itself rather than through chunk_part: written that way
// (29b7428), nvcc split the ring all_reduce's 16-byte stores into two 8-byte
// ones (ST/STG.E.128 in its f16/bf16 kernels: 44 before, 0 after, in nvcc
// 11.8's SASS) and the ring got 13-16% slower on 2x H200 (A/B in one run).
// tests/sass_test.go keeps them 16 bytes wide where nvcc is installed.
template <typename T>
IRISGEN_DEV void block_part(int64_t lo, int64_t hi, int64_t* b_lo, int64_t* b_hi) {
  const int64_t n = hi > lo ? hi - lo : 0;
  const int64_t N = vec<T>::N;
  const int64_t per = ((n + gridDim.x - 1) / gridDim.x + N - 1) / N * N;
  int64_t a = lo + per * (int64_t)blockIdx.x, z = a + per;
  if (a > hi) a = hi;
  if (z > hi) z = hi;
  *b_lo = a;
  *b_hi = z;
}

// ---------------------------------------------------- lamport slots ----
// A Lamport slot carries data whose every element is its own arrival flag:
// an element that still holds the all-ones pattern ("empty", a NaN that no
// arithmetic produces) has not arrived. Writers store an input element
// that happens to be all ones as the same NaN without its sign bit, so no
// value is mistaken for empty; readers spin until no element of what they
// load is empty. A slot is marked empty again only after every peer has
// finished with it (the kernel's call protocol says when).

// empty_bits is the empty pattern of T's raw bits (32 for f32, 16 for f16
// and bf16).
template <typename T>
IRISGEN_DEV constexpr uint32_t empty_bits() {
  return sizeof(T) == 4 ? 0xffffffffu : 0xffffu;
}

IRISGEN_DEV uint32_t raw_bits(float x) { return f32_bits(x); }
IRISGEN_DEV uint32_t raw_bits(irisgen_f16 x) { return x.bits; }
IRISGEN_DEV uint32_t raw_bits(irisgen_bf16 x) { return x.bits; }

template <typename T>
IRISGEN_DEV T with_bits(uint32_t b);
template <>
IRISGEN_DEV float with_bits<float>(uint32_t b) { return bits_f32(b); }
template <>
IRISGEN_DEV irisgen_f16 with_bits<irisgen_f16>(uint32_t b) { return irisgen_f16{(uint16_t)b}; }
template <>
IRISGEN_DEV irisgen_bf16 with_bits<irisgen_bf16>(uint32_t b) { return irisgen_bf16{(uint16_t)b}; }

// slot_bits is element bits b as a writer stores them into a slot: an
// empty-looking element loses its sign bit.
template <typename T>
IRISGEN_DEV uint32_t slot_bits(uint32_t b) {
  return b == empty_bits<T>() ? b & (empty_bits<T>() >> 1) : b;
}

// v16_arrived reports whether no element of v is empty.
template <typename T>
IRISGEN_DEV bool v16_arrived(const v16& v) {
  bool ok = true;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const uint32_t w = v16_word(v, i);
    if (sizeof(T) == 4) ok = ok && w != 0xffffffffu;
    else ok = ok && (w & 0xffffu) != 0xffffu && (w >> 16) != 0xffffu;
  }
  return ok;
}

// v16_unempty clears the sign bit of every element that is all ones.
template <typename T>
IRISGEN_DEV v16 v16_unempty(v16 v) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    uint32_t w = v16_word(v, i);
    if (sizeof(T) == 4) {
      if (w == 0xffffffffu) w = 0x7fffffffu;
    } else {
      if ((w & 0xffffu) == 0xffffu) w &= 0xffff7fffu;
      if ((w >> 16) == 0xffffu) w &= 0x7fffffffu;
    }
    v16_set(v, i, w);
  }
  return v;
}

// Volatile accesses: a spinning reader must see a peer's store without the
// compiler or the L1 cache holding an old copy.
IRISGEN_DEV v16 vload_volatile(const void* p) {
#ifdef IRISGEN_CUDA
  v16 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
#else
  return *(const volatile v16*)p;
#endif
}

IRISGEN_DEV void vstore_volatile(void* p, const v16& v) {
#ifdef IRISGEN_CUDA
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
#else
  *(volatile v16*)p = v;
#endif
}

template <typename T>
IRISGEN_DEV uint32_t load_bits_volatile(const T* p) {
  return sizeof(T) == 4 ? *(const volatile uint32_t*)p : *(const volatile uint16_t*)p;
}

template <typename T>
IRISGEN_DEV void store_bits_volatile(T* p, uint32_t b) {
  if (sizeof(T) == 4) *(volatile uint32_t*)p = b;
  else *(volatile uint16_t*)p = (uint16_t)b;
}

// ------------------------------------------------------- reductions ----

// reduce_one reduces element i over w sources in rank order, in fp32
// (get(p, i, &x) reads source p's element; false on a timeout), and stores
// the result into every one of nd destinations (with Slot, Lamport slot
// rows: an empty-looking result is stored as lamport_put stores it).
template <typename T, typename Op, int W, bool Slot = false, typename Get>
IRISGEN_DEV bool reduce_one(T* const* dst, int nd, int w, int64_t i, Get get) {
  float acc = 0.f;
#pragma unroll
  for (int p = 0; p < W; p++) {
    if (p >= w) break;
    float x;
    if (!get(p, i, &x)) return false;
    acc = p == 0 ? x : Op::apply(acc, x);
  }
  const T r = from_f32<T>(acc);
  for (int d = 0; d < nd; d++) {
    if (Slot) store_bits_volatile(dst[d] + i, slot_bits<T>(raw_bits(r)));
    else dst[d][i] = r;
  }
  return true;
}

// reduce_vecs reduces vectors [0, vecs) from element i0 on like reduce_one,
// 16 bytes at a time: U vectors a thread (strided by nt, so warps stay
// coalesced), all U*W loads (load(p, i)) in flight before the first add;
// ready(p, i, v) then makes sure v holds data (Lamport slots spin, plain
// sources always do) and returns false on a timeout.
template <typename T, typename Op, int W, bool Slot = false, typename Load, typename Ready>
IRISGEN_DEV bool reduce_vecs(T* const* dst, int nd, int w, int64_t i0, int64_t vecs, int64_t tid, int64_t nt, Load load, Ready ready) {
  constexpr int N = vec<T>::N;
  constexpr int U = W >= 8 ? 1 : 8 / W;
  for (int64_t j = tid; j < vecs; j += nt * U) {
    v16 x[U][W];
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (j + u * nt < vecs) {
#pragma unroll
        for (int p = 0; p < W; p++)
          if (p < w) x[u][p] = load(p, i0 + (j + u * nt) * N);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (j + u * nt >= vecs) break;
      const int64_t i = i0 + (j + u * nt) * N;
      float acc[N];
#pragma unroll
      for (int p = 0; p < W; p++) {
        if (p >= w) break;
        if (!ready(p, i, x[u][p])) return false;
        float t[N];
        unpack<T>(x[u][p], t);
#pragma unroll
        for (int e = 0; e < N; e++) acc[e] = p == 0 ? t[e] : Op::apply(acc[e], t[e]);
      }
      const v16 r = pack<T>(acc);
      for (int d = 0; d < nd; d++) {
        if (Slot) vstore_volatile(dst[d] + i, v16_unempty<T>(r));
        else vstore(dst[d] + i, r);
      }
    }
  }
  return true;
}

// reduce_w, reduce_local_rows_w and lamport_reduce_w share their shape (a
// scalar head, vectors, a scalar tail) and their world-size switch, each
// spelled out: with nvcc 11.8 one skeleton over a source functor took
// one_shot from 64 registers to 84, and one dispatcher calling a lambda
// put the captures on the stack (one_shot 16 bytes more by reference, the
// Lamport reductions 304 by value). Measured 2026-11-28; SASS unchanged
// is the bar for a tidy-up here.
//
// reduce_w reduces W sources element by element in rank order, in fp32, and
// stores the result into every one of nd destinations: elements [i0, i1) of
// each, each thread of the block (or grid, with the stride given) taking
// its share. The fixed order makes the result the same on every rank and
// equal to the CPU reference. W is a compile-time world size; reduce_n
// picks it.
template <typename T, typename Op, int W>
IRISGEN_DEV void reduce_w(T* const* dst, int nd, const T* const* src, int w, int64_t i0, int64_t i1, int64_t tid, int64_t nt) {
  bool same = true;
  for (int p = 0; p < w; p++) same = same && same_align(src[p] + i0, src[0] + i0);
  for (int d = 0; d < nd; d++) same = same && same_align(dst[d] + i0, src[0] + i0);
  const span<T> sp(src[0] + i0, i1 - i0, same);
  auto get = [&](int p, int64_t i, float* x) {
    *x = to_f32(src[p][i]);
    return true;
  };
  for (int64_t k = tid; k < sp.head; k += nt) reduce_one<T, Op, W>(dst, nd, w, i0 + k, get);
  reduce_vecs<T, Op, W>(
      dst, nd, w, i0 + sp.head, sp.vecs, tid, nt, [&](int p, int64_t i) { return vload(src[p] + i); },
      [](int, int64_t, v16&) { return true; });
  for (int64_t k = sp.tail + tid; k < i1 - i0; k += nt) reduce_one<T, Op, W>(dst, nd, w, i0 + k, get);
}

// reduce_n dispatches reduce_w on the world size: 1, 2, 4 and 8 get their
// own unrolled code; other sizes take the 8-wide code with a runtime bound.
template <typename T, typename Op>
IRISGEN_DEV void reduce_n(T* const* dst, int nd, const T* const* src, int w, int64_t i0, int64_t i1, int64_t tid, int64_t nt) {
  switch (w) {
    case 1: reduce_w<T, Op, 1>(dst, nd, src, w, i0, i1, tid, nt); break;
    case 2: reduce_w<T, Op, 2>(dst, nd, src, w, i0, i1, tid, nt); break;
    case 4: reduce_w<T, Op, 4>(dst, nd, src, w, i0, i1, tid, nt); break;
    default: reduce_w<T, Op, IRISGEN_MAX_WORLD>(dst, nd, src, w, i0, i1, tid, nt); break;
  }
}

// reduce_local_rows_w reduces elements [i0, i1) over the world in rank
// order, in fp32, into out (a peer's, as often): rank me's values from in,
// every other rank p's from its row of a local buffer, rows + p * stride,
// all of it there already (reduce relay's relay, past the rows' flags).
// The block's threads share the work. The sources are addressed by rank,
// not through an array of pointers, which a kernel keeps on its stack
// (reduce_n's callers).
template <typename T, typename Op, int W>
IRISGEN_DEV void reduce_local_rows_w(int me, T* out, const T* in, const T* rows, int64_t stride, int w, int64_t i0, int64_t i1) {
  auto row = [&](int p) { return p == me ? in : rows + (int64_t)p * stride; };
  bool same = same_align(out + i0, in + i0);
  for (int p = 0; p < w; p++) same = same && same_align(row(p) + i0, in + i0);
  const span<T> sp(in + i0, i1 - i0, same);
  const int64_t tid = threadIdx.x, nt = blockDim.x;
  auto get = [&](int p, int64_t i, float* x) {
    *x = to_f32(row(p)[i]);
    return true;
  };
  for (int64_t k = tid; k < sp.head; k += nt) reduce_one<T, Op, W>(&out, 1, w, i0 + k, get);
  reduce_vecs<T, Op, W>(
      &out, 1, w, i0 + sp.head, sp.vecs, tid, nt, [&](int p, int64_t i) { return vload(row(p) + i); },
      [](int, int64_t, v16&) { return true; });
  for (int64_t k = sp.tail + tid; k < i1 - i0; k += nt) reduce_one<T, Op, W>(&out, 1, w, i0 + k, get);
}

// reduce_local_rows dispatches reduce_local_rows_w on the world size like
// reduce_n.
template <typename T, typename Op>
IRISGEN_DEV void reduce_local_rows(int me, T* out, const T* in, const T* rows, int64_t stride, int w, int64_t i0, int64_t i1) {
  switch (w) {
    case 1: reduce_local_rows_w<T, Op, 1>(me, out, in, rows, stride, w, i0, i1); break;
    case 2: reduce_local_rows_w<T, Op, 2>(me, out, in, rows, stride, w, i0, i1); break;
    case 4: reduce_local_rows_w<T, Op, 4>(me, out, in, rows, stride, w, i0, i1); break;
    default: reduce_local_rows_w<T, Op, IRISGEN_MAX_WORLD>(me, out, in, rows, stride, w, i0, i1); break;
  }
}

// copy_to copies elements [i0, i1) of src to each of nd destinations (one
// load, nd stores), thread tid of nt taking its share, in 16-byte vectors
// where all the pointers share their alignment.
template <typename T>
IRISGEN_DEV void copy_to(T* const* dst, int nd, const T* src, int64_t i0, int64_t i1, int64_t tid, int64_t nt) {
  bool same = true;
  for (int d = 0; d < nd; d++) same = same && same_align(dst[d] + i0, src + i0);
  const span<T> sp(src + i0, i1 - i0, same);
  auto one = [&](int64_t i) {
    const T x = src[i];
    for (int d = 0; d < nd; d++) dst[d][i] = x;
  };
  for (int64_t k = tid; k < sp.head; k += nt) one(i0 + k);
  constexpr int U = 4;  // vectors in flight per thread
  for (int64_t j = tid; j < sp.vecs; j += nt * U) {
    v16 x[U];
#pragma unroll
    for (int u = 0; u < U; u++)
      if (j + u * nt < sp.vecs) x[u] = vload(src + i0 + sp.head + (j + u * nt) * vec<T>::N);
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (j + u * nt >= sp.vecs) break;
      const int64_t i = i0 + sp.head + (j + u * nt) * vec<T>::N;
      for (int d = 0; d < nd; d++) vstore(dst[d] + i, x[u]);
    }
  }
  for (int64_t k = sp.tail + tid; k < i1 - i0; k += nt) one(i0 + k);
}

// copy copies n elements with every thread of the grid: each block one
// contiguous range (block_part), its threads strided within it. Measured
// A/B against a grid-wide stride in one run on 2x H200: all_to_all push
// 10% faster from 16 MiB (its stores to a peer stay together), pull
// unchanged. (The same change to all_gather push's copy_to and to the
// reductions of one_shot, two_shot and reduce_scatter made them no faster
// or 4% slower, so they keep the grid-wide stride.)
template <typename T>
IRISGEN_DEV void copy(T* dst, const T* src, int64_t n) {
  int64_t lo, hi;
  block_part<T>(0, n, &lo, &hi);
  copy_to(&dst, 1, src, lo, hi, threadIdx.x, blockDim.x);
}

// copy_block copies [i0, i1) with the threads of one block.
template <typename T>
IRISGEN_DEV void copy_block(T* dst, const T* src, int64_t i0, int64_t i1) { copy_to(&dst, 1, src, i0, i1, threadIdx.x, blockDim.x); }

// ------------------------------------------------- lamport protocol ----

// lamport_wait spins on the vector at p until it has arrived, within the
// time limit (false on timeout, error record set: info 3, a slot's data from
// peer never arrived).
template <typename T>
IRISGEN_DEV bool lamport_wait(const irisgen_ctx& c, const T* p, v16* v, int peer, uint64_t call) {
  return spin(
      c,
      [&] {
        *v = vload_volatile(p);
        return v16_arrived<T>(*v);
      },
      (uint32_t)peer, call, 3);
}

// lamport_wait1 is lamport_wait for one element; returns its bits.
template <typename T>
IRISGEN_DEV bool lamport_wait1(const irisgen_ctx& c, const T* p, uint32_t* b, int peer, uint64_t call) {
  return spin(
      c,
      [&] {
        *b = load_bits_volatile(p);
        return *b != empty_bits<T>();
      },
      (uint32_t)peer, call, 3);
}

// lamport_put stores elements [i0, i1) of src into dst, a peer's slot row,
// with empty-looking elements changed as above; the block's threads share
// the work.
template <typename T>
IRISGEN_DEV void lamport_put(T* dst, const T* src, int64_t i0, int64_t i1) {
  const span<T> sp(src + i0, i1 - i0, same_align(dst + i0, src + i0));
  const int64_t tid = threadIdx.x, nt = blockDim.x;
  auto one = [&](int64_t i) { store_bits_volatile(dst + i, slot_bits<T>(raw_bits(src[i]))); };
  for (int64_t k = tid; k < sp.head; k += nt) one(i0 + k);
  for (int64_t j = tid; j < sp.vecs; j += nt) {
    const int64_t i = i0 + sp.head + j * vec<T>::N;
    vstore_volatile(dst + i, v16_unempty<T>(vload(src + i)));
  }
  for (int64_t k = sp.tail + tid; k < i1 - i0; k += nt) one(i0 + k);
}

// lamport_clear marks elements [i0, i1) of a local slot row empty.
template <typename T>
IRISGEN_DEV void lamport_clear(T* dst, int64_t i0, int64_t i1) {
  const span<T> sp(dst + i0, i1 - i0, true);
  const int64_t tid = threadIdx.x, nt = blockDim.x;
  v16 e;
#pragma unroll
  for (int i = 0; i < 4; i++) v16_set(e, i, 0xffffffffu);
  for (int64_t k = tid; k < sp.head; k += nt) store_bits_volatile(dst + i0 + k, empty_bits<T>());
  for (int64_t j = tid; j < sp.vecs; j += nt) vstore_volatile(dst + i0 + sp.head + j * vec<T>::N, e);
  for (int64_t k = sp.tail + tid; k < i1 - i0; k += nt) store_bits_volatile(dst + i0 + k, empty_bits<T>());
}

// lamport_reduce_w reduces elements [i0, i1) over the world in rank order,
// in fp32, into out: this rank's own values from in, every peer's from its
// row of the local slot (row p at slot + p * stride), each load repeated
// until it has arrived. The block's threads share the work; all loads of a
// thread's vectors are issued before the first wait. With Slot, out is a
// peer's slot row (reduce lamport_relay's relay stores the result into the
// root's). False on timeout.
template <typename T, typename Op, int W, bool Slot = false>
IRISGEN_DEV bool lamport_reduce_w(const irisgen_ctx& c, T* out, const T* in, const T* slot, int64_t stride, int w, int64_t i0, int64_t i1, uint64_t call) {
  const int me = c.rank;
  auto rows = [&](int p) { return slot + (int64_t)p * stride; };
  bool same = same_align(out + i0, in + i0);
  for (int p = 0; p < w; p++) same = same && (p == me || same_align(rows(p) + i0, in + i0));
  const span<T> sp(in + i0, i1 - i0, same);
  const int64_t tid = threadIdx.x, nt = blockDim.x;
  auto get = [&](int p, int64_t i, float* x) {
    uint32_t b;
    if (p == me) {
      *x = to_f32(in[i]);
    } else if (lamport_wait1(c, rows(p) + i, &b, p, call)) {
      *x = to_f32(with_bits<T>(b));
    } else {
      return false;
    }
    return true;
  };
  for (int64_t k = tid; k < sp.head; k += nt)
    if (!reduce_one<T, Op, W, Slot>(&out, 1, w, i0 + k, get)) return false;
  const bool ok = reduce_vecs<T, Op, W, Slot>(
      &out, 1, w, i0 + sp.head, sp.vecs, tid, nt,
      [&](int p, int64_t i) { return p == me ? vload(in + i) : vload_volatile(rows(p) + i); },
      [&](int p, int64_t i, v16& v) { return p == me || v16_arrived<T>(v) || lamport_wait(c, rows(p) + i, &v, p, call); });
  if (!ok) return false;
  for (int64_t k = sp.tail + tid; k < i1 - i0; k += nt)
    if (!reduce_one<T, Op, W, Slot>(&out, 1, w, i0 + k, get)) return false;
  return true;
}

// lamport_reduce dispatches lamport_reduce_w on the world size like
// reduce_n.
template <typename T, typename Op, bool Slot = false>
IRISGEN_DEV bool lamport_reduce(const irisgen_ctx& c, T* out, const T* in, const T* slot, int64_t stride, int w, int64_t i0, int64_t i1, uint64_t call) {
  switch (w) {
    case 1: return lamport_reduce_w<T, Op, 1, Slot>(c, out, in, slot, stride, w, i0, i1, call);
    case 2: return lamport_reduce_w<T, Op, 2, Slot>(c, out, in, slot, stride, w, i0, i1, call);
    case 4: return lamport_reduce_w<T, Op, 4, Slot>(c, out, in, slot, stride, w, i0, i1, call);
    default: return lamport_reduce_w<T, Op, IRISGEN_MAX_WORLD, Slot>(c, out, in, slot, stride, w, i0, i1, call);
  }
}

// lamport_get copies elements [i0, i1) of every peer's row of a local slot
// (row p at slot + p * stride, p != c.rank) into out + p * stride, each load
// repeated until no element of it is empty (the copies of all_gather and
// all_to_all's lamport variants). The block's threads share the work; a
// thread's loads from every peer are in flight before its first wait. False
// on timeout (error record set).
template <typename T>
IRISGEN_DEV bool lamport_get(const irisgen_ctx& c, T* out, const T* slot, int64_t stride, int w, int64_t i0, int64_t i1, uint64_t call) {
  const int me = c.rank;
  if (w < 2) return true;
  auto rows = [&](int p) { return slot + (int64_t)p * stride; };
  auto dst = [&](int p) { return out + (int64_t)p * stride; };
  const T* base = rows((me + 1) % w) + i0;
  bool same = true;
  for (int p = 0; p < w; p++) same = same && (p == me || (same_align(rows(p) + i0, base) && same_align(dst(p) + i0, base)));
  const span<T> sp(base, i1 - i0, same);
  const int64_t tid = threadIdx.x, nt = blockDim.x;
  auto one = [&](int64_t i) {
    for (int p = 0; p < w; p++) {
      uint32_t b;
      if (p == me) continue;
      if (!lamport_wait1(c, rows(p) + i, &b, p, call)) return false;
      dst(p)[i] = with_bits<T>(b);
    }
    return true;
  };
  for (int64_t k = tid; k < sp.head; k += nt)
    if (!one(i0 + k)) return false;
  for (int64_t j = tid; j < sp.vecs; j += nt) {
    const int64_t i = i0 + sp.head + j * vec<T>::N;
    v16 v[IRISGEN_MAX_WORLD];
#pragma unroll
    for (int p = 0; p < IRISGEN_MAX_WORLD; p++)
      if (p < w && p != me) v[p] = vload_volatile(rows(p) + i);
#pragma unroll
    for (int p = 0; p < IRISGEN_MAX_WORLD; p++) {
      if (p < w && p != me) {
        if (!v16_arrived<T>(v[p]) && !lamport_wait(c, rows(p) + i, &v[p], p, call)) return false;
        vstore(dst(p) + i, v[p]);
      }
    }
  }
  for (int64_t k = sp.tail + tid; k < i1 - i0; k += nt)
    if (!one(i0 + k)) return false;
  return true;
}

// lamport_get_row copies elements [i0, i1) of row, a local slot row that
// peer writes, into out, each load repeated until it has arrived (the
// one-writer Lamport variants: broadcast, scatter, send_recv), and stores
// what arrived into the nf slot rows fwd too (peers' rows at row's offset in
// the symmetric heap, so aligned as row is: broadcast lamport_relay
// forwards so). The block's threads share the work. False on timeout (error
// record set).
template <typename T>
IRISGEN_DEV bool lamport_get_row(const irisgen_ctx& c, T* out, const T* row, int peer, int64_t i0, int64_t i1, uint64_t call,
                                 T* const* fwd = nullptr, int nf = 0) {
  const span<T> sp(row + i0, i1 - i0, same_align(out + i0, row + i0));
  const int64_t tid = threadIdx.x, nt = blockDim.x;
  auto one = [&](int64_t i) {
    uint32_t b;
    if (!lamport_wait1(c, row + i, &b, peer, call)) return false;
    out[i] = with_bits<T>(b);
    for (int f = 0; f < nf; f++) store_bits_volatile(fwd[f] + i, b);
    return true;
  };
  for (int64_t k = tid; k < sp.head; k += nt)
    if (!one(i0 + k)) return false;
  for (int64_t j = tid; j < sp.vecs; j += nt) {
    const int64_t i = i0 + sp.head + j * vec<T>::N;
    v16 v = vload_volatile(row + i);
    if (!v16_arrived<T>(v) && !lamport_wait(c, row + i, &v, peer, call)) return false;
    for (int f = 0; f < nf; f++) vstore_volatile(fwd[f] + i, v);
    vstore(out + i, v);
  }
  for (int64_t k = sp.tail + tid; k < i1 - i0; k += nt)
    if (!one(i0 + k)) return false;
  return true;
}

// Credits for the rooted Lamport variants. Where the writers of a slot
// change from call to call (the root is a launch parameter), no rank's
// progress waits on its readers' as in all_gather's ring of slots, so a
// writer could come round to a slot its reader has not emptied. Each block
// therefore tells every peer, once it has emptied the slot of call k-1, that
// it is at call k (lamport_ack), in its row of the peers' barrier flags,
// which these kernels use for a sync only at a plan's first call; and
// before it stores into a peer's slot in call k (the slot of call k-3) it
// waits until that peer has acked call k-2 (lamport_credit). Launched back
// to back, the ack a writer waits for was sent two calls before: the wait is
// one load of its own memory.

// lamport_ack publishes call k of this block to every peer. Every thread's
// stores before it (the emptied slot) are published with it.
IRISGEN_DEV void lamport_ack(const irisgen_ctx& c, uint64_t k) {
#ifdef IRISGEN_HIP
  fence_release();
#endif
  __syncthreads();
  const int t = threadIdx.x;
  if (t < c.world && t != c.rank) {
    uint64_t* flags = (uint64_t*)c.flags + (uint64_t)blockIdx.x * IRISGEN_MAX_WORLD;
    store_release(detail::peer_ptr(c, flags + c.rank, t), ((uint64_t)c.check << 32) | (uint32_t)k);
  }
}

// lamport_credit waits until every peer in the bit mask peers has acked call
// k-2 of this block: its slot of call k is empty. Every thread gets the same
// answer; false on timeout (error record set).
IRISGEN_DEV bool lamport_credit(const irisgen_ctx& c, uint64_t k, uint32_t peers) {
  block_state& s = state();
  const int t = threadIdx.x;
  if (k >= 3 && t < c.world && t != c.rank && ((peers >> t) & 1u)) {
    const uint64_t* flags = (const uint64_t*)c.flags + (uint64_t)blockIdx.x * IRISGEN_MAX_WORLD;
    const uint32_t e = (uint32_t)(k - 2);
    if (!spin(c, [&] { return (int32_t)((uint32_t)load_acquire(flags + t) - e) >= 0; }, (uint32_t)t, k - 2, 0)) s.failed = 1;
  }
  __syncthreads();
#ifdef IRISGEN_HIP
  fence_acquire();
#endif
  return !s.failed;
}

// lamport_empty empties the block's part [i0, i1) of the three slots of rows
// x n elements that make box, at a plan's first call, or else of the slot of
// the call before; it returns the block's epoch, the call's number k but 0
// at the first call, where the kernel then meets its peers ({{sync}}) and
// counts it call 1. Then the kernel acks k (lamport_ack).
template <typename T>
IRISGEN_DEV uint64_t lamport_empty(T* box, int rows, int64_t n, int64_t i0, int64_t i1) {
  const uint64_t k = epoch();
  T* from = k == 0 ? box : box + (int64_t)((k + 2) % 3) * rows * n;
  for (int r = 0; r < (k == 0 ? 3 * rows : rows); r++) lamport_clear(from + (int64_t)r * n, i0, i1);
  return k;
}

// -------------------------------------------------- element atomics ----

// atomic_apply (below) sets *p = Op(*p, v) atomically at system scope. f32
// sums on NVIDIA use the hardware reduction; everything else is a
// compare-and-swap loop on the aligned 32-bit word that holds the element,
// which is also what AMD needs on fine-grained memory (its packed float
// atomics are not performed there).
// cas_update32 sets the 32-bit word at w to next(old) atomically, retrying
// while other writers get in between.
template <typename Next>
IRISGEN_DEV void cas_update32(uint32_t* w, Next next) {
  uint32_t old = *(volatile uint32_t*)w;
  for (;;) {
    const uint32_t seen = cas32(w, old, next(old));
    if (seen == old) return;
    old = seen;
  }
}

template <typename Op>
IRISGEN_DEV void atomic_f32(float* p, float v, Op) {
  cas_update32((uint32_t*)p, [&](uint32_t old) { return f32_bits(Op::apply(bits_f32(old), v)); });
}
#ifdef IRISGEN_CUDA
IRISGEN_DEV void atomic_f32(float* p, float v, op_sum) {
  asm volatile("red.relaxed.sys.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}
#endif
template <typename Op>
IRISGEN_DEV void atomic_apply(float* p, float v) { atomic_f32(p, v, Op()); }

template <typename Op, typename H>
IRISGEN_DEV void atomic_apply16(H* p, float v) {
  uint32_t* w = (uint32_t*)((uintptr_t)p & ~(uintptr_t)3);
  const int shift = ((uintptr_t)p & 2) ? 16 : 0;
  cas_update32(w, [&](uint32_t old) {
    const H cur{(uint16_t)(old >> shift)};
    const H nxt = from_f32<H>(Op::apply(to_f32(cur), v));
    return (old & ~(0xffffu << shift)) | ((uint32_t)nxt.bits << shift);
  });
}
template <typename Op>
IRISGEN_DEV void atomic_apply(irisgen_f16* p, float v) { atomic_apply16<Op>(p, v); }
template <typename Op>
IRISGEN_DEV void atomic_apply(irisgen_bf16* p, float v) { atomic_apply16<Op>(p, v); }

// -------------------------------------------------------------- locks ----

// lock takes a lock word (0 free, 1 held) for the calling thread, with the
// time limit of every spin; false on timeout (the error record is set).
IRISGEN_DEV bool lock(const irisgen_ctx& c, uint64_t* l, int owner) {
  if (cas64(l, 0, 1) == 0) return true;
  return spin(c, [&] { return load_relaxed(l) == 0 && cas64(l, 0, 1) == 0; }, (uint32_t)owner, 0, 1);
}

// unlock releases a lock word: the holder's writes are visible to the next
// holder.
IRISGEN_DEV void unlock(uint64_t* l) { store_release(l, 0); }

// ------------------------------------------------------- row epilogues ----
// A fused epilogue (all_reduce_rmsnorm, docs/templates.md) works on rows
// of n elements: reduce_rows gives each block its rows, deals each row's
// elements to the block's threads in pieces (row_pieces), reduces the
// sources of every piece in rank order in fp32 (reduce_row) and hands the
// sums to the template's fin, sums what fin returns over the block
// (block_reduce) and hands the row to the template's done. Every pass over
// a row under one span gives each element to the same thread, so a thread
// may overwrite what it read in an earlier pass without a __syncthreads,
// and tensors that are the same memory (in place) stay safe when each
// piece is read before it is written. A piece is k elements: one in the
// row's scalar head and tail, vec<T>::N (one v16) between; the functions
// below take k at run time, a constant once they are inlined.

// aligned_as reports whether every pointer after a is aligned like a
// modulo 16 (then a span of a fits them all).
IRISGEN_DEV bool aligned_as(const void*) { return true; }
template <typename... P>
IRISGEN_DEV bool aligned_as(const void* a, const void* b, P... ps) {
  return same_align(a, b) && aligned_as(a, ps...);
}

// block_reduce returns Op over every thread's v, in fp32, to every thread
// of the block, in a fixed order (the same result every run). Every thread
// of the block calls it, the same number of times (it holds __syncthreads).
template <typename Op>
IRISGEN_DEV float block_reduce(float v) {
  // Groups of 32 lanes on both platforms (an AMD wave of 64 is two).
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#ifdef IRISGEN_CUDA
    v = Op::apply(v, __shfl_xor_sync(0xffffffffu, v, o, 32));
#else
    v = Op::apply(v, __shfl_xor(v, o, 32));
#endif
  }
  __shared__ float part[32];  // one a group: 1024 threads at most
  __syncthreads();            // the last call's readers are done with part
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = part[0];
  const int groups = (int)((blockDim.x + 31) >> 5);
  for (int g = 1; g < groups; g++) r = Op::apply(r, part[g]);
  return r;
}

// row_pieces calls f(i, k) for every piece [i, i + k) of the row [0, n)
// that this thread takes under sp (the row's span): the head's and the
// tail's elements one by one, vectors between, thread t of the block
// taking pieces t, t + blockDim.x, ... of each part.
template <typename T, typename F>
IRISGEN_DEV void row_pieces(const span<T>& sp, int64_t n, F f) {
  const int64_t tid = threadIdx.x, nt = blockDim.x;
  for (int64_t k = tid; k < sp.head; k += nt) f(k, 1);
  for (int64_t j = tid; j < sp.vecs; j += nt) f(sp.head + j * vec<T>::N, vec<T>::N);
  for (int64_t k = sp.tail + tid; k < n; k += nt) f(k, 1);
}

// load_f32 and store_f32 move a piece of k elements between T memory and
// fp32: one v16 when k is vec<T>::N (its start 16-byte aligned, as a
// span's vectors are), else element by element. On NVIDIA the v16 store
// is st.global.v4 in PTX: through vstore, nvcc 11.8 split every 16-byte
// store of all_reduce_rmsnorm's Lamport epilogue into four 4-byte ones
// (its PTX: no st.global.v4 of 23), and __stwb is a strong store in SASS
// (STG.E.128.STRONG.SM) where this is a plain STG.E.128. The memory
// clobber keeps it in program order with the thread's other accesses, as
// a store through a pointer the compiler cannot tell apart from the others
// already is.
template <typename T>
IRISGEN_DEV void load_f32(const T* p, float* x, int k) {
  if (k == vec<T>::N) {
    unpack(vload(p), x, p);
    return;
  }
  for (int e = 0; e < k; e++) x[e] = to_f32(p[e]);
}
template <typename T>
IRISGEN_DEV void store_f32(T* p, const float* x, int k) {
  if (k == vec<T>::N) {
    const v16 v = pack(x, (const T*)p);
#ifdef IRISGEN_CUDA
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
#else
    vstore(p, v);
#endif
    return;
  }
  for (int e = 0; e < k; e++) p[e] = from_f32<T>(x[e]);
}

// reduce_row sums w sources in rank order in fp32 for every piece of the
// row [o, o + n) this thread takes (row_pieces' split and order under sp,
// the row's span) and hands each piece's sums to fin(i, acc, k) (elements
// [i, i + k), i counted from the tensor's start like o). Vectors go U a
// thread at a time with every load in flight before the first add, as in
// reduce_vecs: load(p, i) loads source p's v16 at element i, ready(p, i,
// v) makes sure v holds data (Lamport slots spin; plain sources always
// do), get(p, i, &x) reads one element; both false on a timeout, which
// ends the thread's share of the row (false). W is the world size at
// compile time, w's bound.
template <typename T, int W, typename Load, typename Ready, typename Get, typename Fin>
IRISGEN_DEV bool reduce_row(const span<T>& sp, int64_t n, int64_t o, int w, Load load, Ready ready, Get get, Fin fin) {
  constexpr int N = vec<T>::N;
  constexpr int U = W >= 8 ? 1 : 8 / W;
  const int64_t tid = threadIdx.x, nt = blockDim.x;
  auto one = [&](int64_t i) {
    float acc[1];
#pragma unroll
    for (int p = 0; p < W; p++) {
      if (p >= w) break;
      float x;
      if (!get(p, i, &x)) return false;
      acc[0] = p == 0 ? x : acc[0] + x;
    }
    fin(i, acc, 1);
    return true;
  };
  for (int64_t k = tid; k < sp.head; k += nt)
    if (!one(o + k)) return false;
  for (int64_t j = tid; j < sp.vecs; j += nt * U) {
    v16 x[U][W];
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (j + u * nt < sp.vecs) {
#pragma unroll
        for (int p = 0; p < W; p++)
          if (p < w) x[u][p] = load(p, o + sp.head + (j + u * nt) * N);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (j + u * nt >= sp.vecs) break;
      const int64_t i = o + sp.head + (j + u * nt) * N;
      float acc[N];
#pragma unroll
      for (int p = 0; p < W; p++) {
        if (p >= w) break;
        if (!ready(p, i, x[u][p])) return false;
        float t[N];
        unpack<T>(x[u][p], t);
#pragma unroll
        for (int e = 0; e < N; e++) acc[e] = p == 0 ? t[e] : acc[e] + t[e];
      }
      fin(i, acc, N);
    }
  }
  for (int64_t k = sp.tail + tid; k < n; k += nt)
    if (!one(o + k)) return false;
  return true;
}

// reduce_rows_w runs the rows r0, r0 + step, ... below r1 of this block
// (a tensor of rows of n elements): for each, span_of(o) splits the row
// starting at element o; reduce_row reduces its w sources (load, ready,
// get) piece by piece and hands each piece to fin(i, acc, k), which
// returns its share of a row-wide sum (a sum of squares); done(o, sp, sum)
// then gets the block's sum, block_reduce<op_sum>, and writes the row.
// False when a source timed out on this thread: its later rows are still
// reduced and done (with what the loads gave), so that every thread meets
// the others in every block_reduce. W is the world size at compile time.
template <typename T, int W, typename Span, typename Load, typename Ready, typename Get, typename Fin, typename Done>
IRISGEN_DEV bool reduce_rows_w(int64_t r0, int64_t r1, int64_t step, int64_t n, int w, Span span_of, Load load, Ready ready,
                               Get get, Fin fin, Done done) {
  bool ok = true;
  for (int64_t r = r0; r < r1; r += step) {
    const int64_t o = r * n;
    const span<T> sp = span_of(o);
    float sum = 0.f;
    ok = ok && reduce_row<T, W>(sp, n, o, w, load, ready, get, [&](int64_t i, float* acc, int k) { sum += fin(i, acc, k); });
    done(o, sp, block_reduce<op_sum>(sum));
  }
  return ok;
}

// reduce_rows_n runs reduce_rows_w on this block's rows of t (blockIdx.x,
// blockIdx.x + gridDim.x, ...), dispatched once on the world size like
// reduce_n: 1, 2 and 4 get their own code, others the 8-wide code with a
// runtime bound. (Dispatched on every row instead, nvcc 11.8 kept every
// world's code live at once: 128 registers and spills against 64 to 94.)
template <typename T, typename Span, typename Load, typename Ready, typename Get, typename Fin, typename Done>
IRISGEN_DEV bool reduce_rows_n(int64_t t, int64_t n, int w, Span span_of, Load load, Ready ready, Get get, Fin fin, Done done) {
  const int64_t r0 = blockIdx.x, step = gridDim.x;
  switch (w) {
    case 1: return reduce_rows_w<T, 1>(r0, t, step, n, w, span_of, load, ready, get, fin, done);
    case 2: return reduce_rows_w<T, 2>(r0, t, step, n, w, span_of, load, ready, get, fin, done);
    case 4: return reduce_rows_w<T, 4>(r0, t, step, n, w, span_of, load, ready, get, fin, done);
    default: return reduce_rows_w<T, IRISGEN_MAX_WORLD>(r0, t, step, n, w, span_of, load, ready, get, fin, done);
  }
}

// reduce_rows runs reduce_rows_n on w plain sources, src[p] being rank
// p's tensor of t rows of n elements (loaded as they are: nothing to wait
// for), handing each piece's sums to fin and each row to done as above.
template <typename T, typename Span, typename Fin, typename Done>
IRISGEN_DEV void reduce_rows(int64_t t, int64_t n, const T* const* src, int w, Span span_of, Fin fin, Done done) {
  reduce_rows_n<T>(
      t, n, w, span_of, [&](int p, int64_t i) { return vload(src[p] + i); }, [](int, int64_t, v16&) { return true; },
      [&](int p, int64_t i, float* x) {
        *x = to_f32(src[p][i]);
        return true;
      },
      fin, done);
}

// map_rows runs reduce_rows_w with one local source, src: the rows r0,
// r0 + step, ... below r1, each piece of src in fp32 handed to fin and
// each row to done as above.
template <typename T, typename Span, typename Fin, typename Done>
IRISGEN_DEV void map_rows(int64_t r0, int64_t r1, int64_t step, int64_t n, const T* src, Span span_of, Fin fin, Done done) {
  reduce_rows_w<T, 1>(
      r0, r1, step, n, 1, span_of, [&](int, int64_t i) { return vload(src + i); }, [](int, int64_t, v16&) { return true; },
      [&](int, int64_t i, float* x) {
        *x = to_f32(src[i]);
        return true;
      },
      fin, done);
}

// ------------------------------------------------------------- rmsnorm ----

// add_residual is an RMSNorm epilogue's fin: x = acc + res (fp32), rounded
// once to T, is stored into dst (which may be res) and left in acc as
// fp32; it returns the sum of the squares of the rounded values (the norm
// is of what the next layer reads).
template <typename T>
IRISGEN_DEV float add_residual(T* dst, const T* res, float* acc, int k) {
  float r[vec<T>::N];
  load_f32(res, r, k);
  float ss = 0.f;
#pragma unroll
  for (int e = 0; e < vec<T>::N; e++) {
    if (e >= k) break;
    acc[e] = to_f32(from_f32<T>(acc[e] + r[e]));
    ss += acc[e] * acc[e];
  }
  store_f32(dst, acc, k);
  return ss;
}

// rms_scale is 1/sqrt(ss/n + eps) in fp32: the factor of a row of n
// elements whose squares sum to ss.
IRISGEN_DEV float rms_scale(float ss, int64_t n, float eps) { return rsqrtf(ss / (float)n + eps); }

// rmsnorm_row writes a row's RMSNorm under sp: out = x * scale * w, piece
// by piece, fp32 rounded once; with res, x is also copied into res (after
// w's piece is read, so w may be res or out, in place).
template <typename T>
IRISGEN_DEV void rmsnorm_row(const span<T>& sp, int64_t n, const T* x, const T* w, float scale, T* out, T* res) {
  row_pieces<T>(sp, n, [&](int64_t i, int k) {
    float v[vec<T>::N], g[vec<T>::N];
    load_f32(x + i, v, k);
    load_f32(w + i, g, k);
    if (res) store_f32(res + i, v, k);
#pragma unroll
    for (int e = 0; e < vec<T>::N; e++) {
      if (e >= k) break;
      v[e] = v[e] * scale * g[e];
    }
    store_f32(out + i, v, k);
  });
}
template <typename T>
IRISGEN_DEV void rmsnorm_row(const span<T>& sp, int64_t n, const T* x, const T* w, float scale, T* out) {
  rmsnorm_row<T>(sp, n, x, w, scale, out, (T*)nullptr);
}

}  // namespace irisgen

#endif  // IRISGEN_H
