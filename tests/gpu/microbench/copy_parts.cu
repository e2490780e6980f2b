// copy_parts: what each part of a copy-engine launch costs, reduced to the
// driver calls with no irisgen code, so that a change to the copy launch's
// barrier is chosen from numbers. Every GPU of the machine (or the first
// argv[1]) takes part; one host thread drives them all (graphs run
// asynchronously, so the GPUs meet). A round on each GPU is one of:
//
//   copies   the copies alone: this GPU's block of `bytes` into every
//            peer (cuMemcpyAsync on unified addresses), one stream
//   memop    an enter barrier, the copies, a done barrier, each barrier
//            one cuStreamBatchMemOp (1 into this GPU's word on every
//            peer, then for every peer a wait for its word here and its
//            reset): the runtime's copy launch in mode device
//   memop+seen  as memop, plus a 64-byte device-to-host copy after the
//            enter barrier (the runtime's refusal snapshot)
//   kernel   as memop, with each barrier a kernel of one block that raises
//            a launch-counted word on every peer and spins on its own
//   kernels  the kernel barrier alone, twice
//   memops   the memop barrier alone, twice
//   kseen    as kernel, the enter kernel also storing the 64 bytes of the
//            refusal snapshot into the pinned host area itself
//   kseen+memop  the enter barrier as kseen's, the done barrier a memop
//   memop+kseen  the other way round (the seen copy left out)
//   craise   as memop, the done barrier's raises 4-byte copies of 1 on the
//            copies' stream (the copy engine signals after its data)
//   kseen+craise  the enter barrier as kseen's, the done barrier as craise's
//
// Each is captured into one graph a GPU holding `rounds` rounds, replayed
// `reps` times after a warm-up; the time a round is GPU 0's event time
// over the replays / rounds, min / median / max over 7 measurements.
//
//   nvcc -O2 -o copy_parts copy_parts.cu -lcuda && ./copy_parts [gpus] [bytes]
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "../cuda_check.h"

enum { MAXG = 8, ENTER = 0, DONE = 1 };

struct gpu_state {
  cudaStream_t s;
  uint32_t* words;       // [2][MAXG]: the memop barrier's words (0 or 1)
  unsigned long long* k; // [2][MAXG] launch-counted words, then [2] counters
  char* src;
  char* dst;             // [MAXG][bytes]
  void* seen;            // 64 bytes of pinned host memory
  uint32_t* one;         // a device word holding 1 (craise's source)
};

static int G;
static const char* part = "setup";

// A part that does not finish within the alarm says which it was and
// exits, so a device call never waits out its limit on this tool.
static void hung(int) {
  char m[128];
  int n = snprintf(m, sizeof m, "copy_parts: part %s did not finish within 60 s\n", part);
  if (write(2, m, n) < 0) _exit(4);
  _exit(3);
}
static size_t bytes;
static gpu_state g[MAXG];

// kbar is the kernel barrier: thread j < n (j != me) raises this launch's
// count in word me of peer j's row and waits for word j of its own row to
// reach it. The count lives in the GPU's own memory, so a replay counts on.
struct kargs {
  unsigned long long* peer[MAXG];
  unsigned long long* own;
  unsigned long long* ctr;
  const uint32_t* snap;  // with seen: 16 words copied to seen after the wait
  uint32_t* seen;
  int me, n;
};

__global__ void kbar(kargs a) {
  __shared__ unsigned long long e;
  if (threadIdx.x == 0) e = *a.ctr + 1;
  __syncthreads();
  const int j = threadIdx.x;
  if (j < a.n && j != a.me) {
    __threadfence_system();
    atomicExch(a.peer[j] + a.me, e);
    while (atomicAdd(a.own + j, 0ull) < e) {
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) *a.ctr = e;
  if (a.seen && threadIdx.x < 16) a.seen[threadIdx.x] = a.snap[threadIdx.x];
}

static void memop_barrier(int i, int row, bool raise = true) {
  CUstreamBatchMemOpParams ops[3 * MAXG];
  int n = 0;
  memset(ops, 0, sizeof ops);
  for (int j = 0; j < G && raise; j++) {
    if (j == i) continue;
    ops[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[n].writeValue.address = (CUdeviceptr)(g[j].words + row * MAXG + i);
    ops[n].writeValue.value = 1;
    n++;
  }
  for (int j = 0; j < G; j++) {
    if (j == i) continue;
    ops[n].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[n].waitValue.address = (CUdeviceptr)(g[i].words + row * MAXG + j);
    ops[n].waitValue.value = 1;
    ops[n].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    n++;
    ops[n].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[n].writeValue.address = (CUdeviceptr)(g[i].words + row * MAXG + j);
    ops[n].writeValue.value = 0;
    n++;
  }
  CKD(cuStreamBatchMemOp_v2((CUstream)g[i].s, n, ops, 0));  // v1 is not capturable
}

static void kernel_barrier(int i, int row, bool seen = false) {
  kargs a;
  memset(&a, 0, sizeof a);
  for (int j = 0; j < G; j++) a.peer[j] = g[j].k + row * MAXG;
  a.own = g[i].k + row * MAXG;
  a.ctr = g[i].k + 2 * MAXG + row;
  a.me = i;
  a.n = G;
  if (seen) {
    a.snap = g[i].words;
    CK(cudaHostGetDevicePointer((void**)&a.seen, g[i].seen, 0));
  }
  kbar<<<1, 32, 0, g[i].s>>>(a);
  CK(cudaGetLastError());
}

static void copies(int i) {
  for (int j = 0; j < G; j++)
    if (j != i) CKD(cuMemcpyAsync((CUdeviceptr)(g[j].dst + i * bytes), (CUdeviceptr)g[i].src, bytes, (CUstream)g[i].s));
}

// copy_raise raises this GPU's word of row on every peer by a 4-byte copy
// on its stream, behind the copies.
static void copy_raise(int i, int row) {
  for (int j = 0; j < G; j++)
    if (j != i) CKD(cuMemcpyAsync((CUdeviceptr)(g[j].words + row * MAXG + i), (CUdeviceptr)g[i].one, 4, (CUstream)g[i].s));
}

static void round_of(int i, const char* what) {
  if (!strcmp(what, "copies")) {
    copies(i);
  } else if (!strcmp(what, "memop") || !strcmp(what, "memop+seen")) {
    // Both barriers, always: a word's writer stores its next 1 only after
    // the other row's wait, which comes after the reader's reset of this
    // one (an enter barrier alone, round after round, can store a 1 into
    // a word still holding the last, and the reader then waits for ever).
    memop_barrier(i, ENTER);
    if (!strcmp(what, "memop+seen")) CK(cudaMemcpyAsync(g[i].seen, g[i].words, 64, cudaMemcpyDeviceToHost, g[i].s));
    copies(i);
    memop_barrier(i, DONE);
  } else if (!strcmp(what, "kernel")) {
    kernel_barrier(i, ENTER);
    copies(i);
    kernel_barrier(i, DONE);
  } else if (!strcmp(what, "kernels")) {
    kernel_barrier(i, ENTER);
    kernel_barrier(i, DONE);
  } else if (!strcmp(what, "memops")) {
    memop_barrier(i, ENTER);
    memop_barrier(i, DONE);
  } else if (!strcmp(what, "kseen")) {
    kernel_barrier(i, ENTER, true);
    copies(i);
    kernel_barrier(i, DONE);
  } else if (!strcmp(what, "kseen+memop")) {
    // The kernel's words count launches and the memop's hold 0 or 1, one
    // row each: the enter row (kernel) orders the done row's raises.
    kernel_barrier(i, ENTER, true);
    copies(i);
    memop_barrier(i, DONE);
  } else if (!strcmp(what, "craise")) {
    memop_barrier(i, ENTER);
    copies(i);
    copy_raise(i, DONE);
    memop_barrier(i, DONE, false);
  } else if (!strcmp(what, "kseen+craise")) {
    kernel_barrier(i, ENTER, true);
    copies(i);
    copy_raise(i, DONE);
    memop_barrier(i, DONE, false);
  } else if (!strcmp(what, "memop+kseen")) {
    memop_barrier(i, ENTER);
    copies(i);
    kernel_barrier(i, DONE);
  }
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGALRM, hung);
  alarm(60);
  CK(cudaGetDeviceCount(&G));
  if (argc > 1) G = std::min(G, atoi(argv[1]));
  bytes = argc > 2 ? strtoull(argv[2], 0, 10) : 4096;
  if (G < 2 || G > MAXG) {
    fprintf(stderr, "copy_parts: needs 2 to %d GPUs, has %d\n", MAXG, G);
    return 2;
  }
  for (int i = 0; i < G; i++) {
    CK(cudaSetDevice(i));
    for (int j = 0; j < G; j++)
      if (j != i) CK(cudaDeviceEnablePeerAccess(j, 0));
    CK(cudaStreamCreateWithFlags(&g[i].s, cudaStreamNonBlocking));
    CK(cudaMalloc(&g[i].words, 2 * MAXG * 4));
    CK(cudaMemset(g[i].words, 0, 2 * MAXG * 4));
    CK(cudaMalloc(&g[i].k, (2 * MAXG + 2) * 8));
    CK(cudaMemset(g[i].k, 0, (2 * MAXG + 2) * 8));
    CK(cudaMalloc(&g[i].src, bytes));
    CK(cudaMemset(g[i].src, 1, bytes));
    CK(cudaMalloc(&g[i].dst, MAXG * bytes));
    CK(cudaMallocHost(&g[i].seen, 64));
    CK(cudaMalloc(&g[i].one, 4));
    const uint32_t one = 1;
    CK(cudaMemcpy(g[i].one, &one, 4, cudaMemcpyHostToDevice));
  }
  for (int i = 0; i < G; i++) {
    CK(cudaSetDevice(i));
    CK(cudaDeviceSynchronize());
  }
  const int rounds = 20, reps = 10;
  const char* parts[] = {"copies", "memop", "memop+seen", "kernel", "kernels", "memops", "kseen", "kseen+memop", "memop+kseen", "craise", "kseen+craise"};
  printf("copy_parts: %d GPUs, %zu bytes a copy (%d copies a GPU), graph of %d rounds, us a round: min / median / max of 7\n", G, bytes,
         G - 1, rounds);
  for (const char* what : parts) {
    part = what;
    alarm(60);
    cudaGraphExec_t ex[MAXG];
    for (int i = 0; i < G; i++) {
      CK(cudaSetDevice(i));
      CK(cudaStreamBeginCapture(g[i].s, cudaStreamCaptureModeThreadLocal));
      for (int r = 0; r < rounds; r++) round_of(i, what);
      cudaGraph_t gr;
      CK(cudaStreamEndCapture(g[i].s, &gr));
      CK(cudaGraphInstantiateWithFlags(&ex[i], gr, 0));
      CK(cudaGraphDestroy(gr));
    }
    std::vector<double> t;
    for (int m = -1; m < 7; m++) {
      cudaEvent_t a, b;
      CK(cudaSetDevice(0));
      CK(cudaEventCreate(&a));
      CK(cudaEventCreate(&b));
      CK(cudaEventRecord(a, g[0].s));
      for (int r = 0; r < reps; r++)
        for (int i = 0; i < G; i++) {
          CK(cudaSetDevice(i));
          CK(cudaGraphLaunch(ex[i], g[i].s));
        }
      CK(cudaSetDevice(0));
      CK(cudaEventRecord(b, g[0].s));
      for (int i = 0; i < G; i++) {
        CK(cudaSetDevice(i));
        CK(cudaStreamSynchronize(g[i].s));
      }
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      if (m >= 0) t.push_back(ms * 1000.0 / (reps * rounds));  // m = -1 warms up
      CK(cudaEventDestroy(a));
      CK(cudaEventDestroy(b));
    }
    std::sort(t.begin(), t.end());
    printf("%-12s %8.2f / %8.2f / %8.2f\n", what, t[0], t[3], t[6]);
    for (int i = 0; i < G; i++) {
      CK(cudaSetDevice(i));
      CK(cudaGraphExecDestroy(ex[i]));
    }
  }
  return 0;
}
