// graph_wait: does a sanitizer run graphs whose nodes wait on memory another
// GPU's graph writes? It is what a copy-engine variant's barrier is (a
// stream write of a flag into the peer's memory, a stream wait on this
// GPU's flag), reduced to the driver calls, with no irisgen code: two GPUs,
// one host thread each (as the ranks of an in-process world), each stream
// writes 1 into the other GPU's flag, waits until its own flag is 1, then
// copies 1 MiB from the peer (cuMemcpyAsync on unified addresses, as the
// runtime's copies: cudaMemcpyPeerAsync cannot be captured). Eagerly
// first, then captured into one graph a GPU and replayed (flags cleared
// between rounds).
//
//   nvcc -o graph_wait graph_wait.cu -lcuda && ./graph_wait [rounds]
//   compute-sanitizer --tool initcheck ./graph_wait
//
// It prints "eager ok", "captured", then "graph ok" after the replays;
// where the output stops is where it hung.
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../cuda_check.h"

static const size_t bytes = 1 << 20;
static int rounds = 10;
static cudaStream_t st[2];
static unsigned* flag[2];  // flag[g] lives on GPU g
static char* buf[2];       // buf[g] on GPU g: the first half is sent, the second received
static pthread_barrier_t meet;

// step enqueues one GPU's part: signal the peer, wait for it, copy from it.
static void step(int g) {
  const int p = 1 - g;
  CKD(cuStreamWriteValue32_v2((CUstream)st[g], (CUdeviceptr)flag[p], 1, 0));
  CKD(cuStreamWaitValue32_v2((CUstream)st[g], (CUdeviceptr)flag[g], 1, CU_STREAM_WAIT_VALUE_GEQ));
  CKD(cuMemcpyAsync((CUdeviceptr)(buf[g] + bytes / 2), (CUdeviceptr)buf[p], bytes / 2, (CUstream)st[g]));
}

// said prints what both GPUs reached, once.
static void said(int g, const char* what) {
  pthread_barrier_wait(&meet);
  if (g == 0) {
    printf("%s\n", what);
    fflush(stdout);
  }
}

// clear_flag zeroes this GPU's flag; both are zero when it returns.
static void clear_flag(int g) {
  CK(cudaMemset(flag[g], 0, sizeof(unsigned)));
  CK(cudaDeviceSynchronize());
  pthread_barrier_wait(&meet);
}

// rank is one GPU's host thread: eagerly, then a graph replayed.
static void* rank(void* arg) {
  const int g = (int)(long)arg;
  CK(cudaSetDevice(g));
  clear_flag(g);
  step(g);
  CK(cudaStreamSynchronize(st[g]));
  said(g, "eager ok");

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(st[g], cudaStreamCaptureModeThreadLocal));
  step(g);
  CK(cudaStreamEndCapture(st[g], &graph));
  CK(cudaGraphInstantiate(&exec, graph, NULL, NULL, 0));
  CK(cudaGraphDestroy(graph));
  said(g, "captured");
  for (int k = 0; k < rounds; k++) {
    clear_flag(g);
    CK(cudaGraphLaunch(exec, st[g]));
    CK(cudaStreamSynchronize(st[g]));
  }
  said(g, "graph ok");
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) rounds = atoi(argv[1]);
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
    CK(cudaDeviceSynchronize());
  }
  pthread_barrier_init(&meet, NULL, 2);
  pthread_t th[2];
  for (int g = 0; g < 2; g++) pthread_create(&th[g], NULL, rank, (void*)(long)g);
  for (int g = 0; g < 2; g++) pthread_join(th[g], NULL);
  printf("(%d rounds)\n", rounds);
  return 0;
}
