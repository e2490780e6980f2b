// graph_wait: does a sanitizer run graphs whose nodes wait on memory another
// GPU's graph writes? It is what a copy-engine variant's barrier is (a
// stream write of a flag into the peer's memory, a stream wait on this
// GPU's flag), reduced to the driver calls, with no irisgen code: two GPUs,
// each stream writes 1 into the other GPU's flag, waits until its own flag
// is 1, then copies 1 MiB from the peer. Eagerly first, then captured into
// one graph a GPU and replayed (flags cleared between rounds).
//
//   nvcc -o graph_wait graph_wait.cu -lcuda && ./graph_wait [rounds]
//   compute-sanitizer --tool initcheck ./graph_wait
//
// It prints "eager ok", then "graph ok" after the replays; a run that
// prints the first but not the second hung in the replays.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                              \
  do {                                                                     \
    cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                               \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)
#define CKD(x)                                                             \
  do {                                                                     \
    CUresult r_ = (x);                                                     \
    if (r_ != CUDA_SUCCESS) {                                              \
      const char* m_ = "";                                                 \
      cuGetErrorString(r_, &m_);                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, m_);      \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static const size_t bytes = 1 << 20;
static cudaStream_t st[2];
static unsigned* flag[2];  // flag[g] lives on GPU g
static char* buf[2];       // buf[g] on GPU g: the first half is sent, the second received

// step enqueues one GPU's part: signal the peer, wait for it, copy from it.
static void step(int g) {
  const int p = 1 - g;
  CKD(cuStreamWriteValue32_v2((CUstream)st[g], (CUdeviceptr)flag[p], 1, 0));
  CKD(cuStreamWaitValue32_v2((CUstream)st[g], (CUdeviceptr)flag[g], 1, CU_STREAM_WAIT_VALUE_GEQ));
  CK(cudaMemcpyPeerAsync(buf[g] + bytes / 2, g, buf[p], p, bytes / 2, st[g]));
}

static void clear_flags() {
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaMemset(flag[g], 0, sizeof(unsigned)));
    CK(cudaDeviceSynchronize());
  }
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 10;
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) {
    fprintf(stderr, "graph_wait needs 2 GPUs, found %d\n", n);
    return 2;
  }
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaDeviceEnablePeerAccess(1 - g, 0));
    CK(cudaStreamCreateWithFlags(&st[g], cudaStreamNonBlocking));
    CK(cudaMalloc(&flag[g], sizeof(unsigned)));
    CK(cudaMalloc(&buf[g], bytes));
    CK(cudaMemset(buf[g], g + 1, bytes));
  }
  clear_flags();
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    step(g);
  }
  for (int g = 0; g < 2; g++) CK(cudaStreamSynchronize(st[g]));
  printf("eager ok\n");
  fflush(stdout);

  cudaGraphExec_t exec[2];
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    cudaGraph_t graph;
    CK(cudaStreamBeginCapture(st[g], cudaStreamCaptureModeThreadLocal));
    step(g);
    CK(cudaStreamEndCapture(st[g], &graph));
    CK(cudaGraphInstantiate(&exec[g], graph, NULL, NULL, 0));
    CK(cudaGraphDestroy(graph));
  }
  for (int k = 0; k < rounds; k++) {
    clear_flags();
    for (int g = 0; g < 2; g++) {
      CK(cudaSetDevice(g));
      CK(cudaGraphLaunch(exec[g], st[g]));
    }
    for (int g = 0; g < 2; g++) CK(cudaStreamSynchronize(st[g]));
  }
  printf("graph ok (%d rounds)\n", rounds);
  return 0;
}
