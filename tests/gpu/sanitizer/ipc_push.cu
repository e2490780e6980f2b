// ipc_push: does a sanitizer run copies that push into another process's
// GPU memory behind stream-ordered flags? It is a copy-engine launch of a
// world of 2 processes (send_recv's and shift's copy_push), reduced to the
// driver calls, with no irisgen code: two processes, one GPU each, each
// maps the other's buffer through a CUDA IPC handle (as the runtime maps
// its peers' heaps), then per round and size enqueues on its stream: a
// stream write of the round's number into the peer's flag, a wait until
// its own flag holds it (the enter barrier), an asynchronous copy of that
// many bytes from its buffer into the peer's (cuMemcpyDtoDAsync), and the
// same barrier again on a second flag (the done barrier); then it
// synchronises the stream. Sizes 2 bytes, 4 KiB + 2 and 4 MiB, as the
// suite's quick sizes take.
//
//   nvcc -o ipc_push ipc_push.cu -lcuda && ./ipc_push [rounds]
//   compute-sanitizer --tool initcheck --target-processes all ./ipc_push
//
// It prints "mapped", then "pushed" once both processes have run every
// round; where the output stops is where it hung.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define CK(x)                                                                                \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)
#define CKD(x)                                                                               \
  do {                                                                                       \
    CUresult r_ = (x);                                                                       \
    if (r_ != CUDA_SUCCESS) {                                                                \
      const char* m_ = "";                                                                   \
      cuGetErrorString(r_, &m_);                                                             \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, m_);                        \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

static const size_t data = 4 << 20;           // the pushed bytes' room
static const size_t bytes = data + 256;       // then the two flags
static const size_t sizes[] = {2, 4096 + 2, 4 << 20};

// full reads or writes n bytes through fd, or exits.
static void full(ssize_t (*io)(int, void*, size_t), int fd, void* p, size_t n) {
  for (size_t k = 0; k < n;) {
    ssize_t m = io(fd, (char*)p + k, n - k);
    if (m <= 0) {
      perror("ipc_push: pipe");
      exit(1);
    }
    k += (size_t)m;
  }
}
static ssize_t rd(int fd, void* p, size_t n) { return read(fd, p, n); }
static ssize_t wr(int fd, void* p, size_t n) { return write(fd, p, n); }

// barrier enqueues one barrier on flag word w (0 enter, 1 done): v into the
// peer's word, then a wait until this GPU's word holds at least v.
static void barrier(CUstream s, char* own, char* peer, int w, unsigned v) {
  CKD(cuStreamWriteValue32_v2(s, (CUdeviceptr)(peer + data + 4 * w), v, 0));
  CKD(cuStreamWaitValue32_v2(s, (CUdeviceptr)(own + data + 4 * w), v, CU_STREAM_WAIT_VALUE_GEQ));
}

// rank is one process: GPU g, handles sent on out and the peer's read on in.
static int rank(int g, int in, int out, int rounds) {
  CK(cudaSetDevice(g));
  char* own;
  CK(cudaMalloc(&own, bytes));
  CK(cudaMemset(own, g + 1, data));
  CK(cudaMemset(own + data, 0, bytes - data));
  CK(cudaDeviceSynchronize());
  cudaIpcMemHandle_t mine, theirs;
  CK(cudaIpcGetMemHandle(&mine, own));
  full(wr, out, &mine, sizeof mine);
  full(rd, in, &theirs, sizeof theirs);
  char* peer;
  CK(cudaIpcOpenMemHandle((void**)&peer, theirs, cudaIpcMemLazyEnablePeerAccess));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  char ok = 1;
  full(wr, out, &ok, 1);
  full(rd, in, &ok, 1);
  if (g == 0) {
    printf("mapped\n");
    fflush(stdout);
  }
  unsigned v = 0;
  for (int r = 0; r < rounds; r++) {
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      v++;
      barrier((CUstream)st, own, peer, 0, v);
      CKD(cuMemcpyDtoDAsync((CUdeviceptr)peer, (CUdeviceptr)own, sizes[k], (CUstream)st));
      barrier((CUstream)st, own, peer, 1, v);
      CK(cudaStreamSynchronize(st));
    }
  }
  full(wr, out, &ok, 1);
  full(rd, in, &ok, 1);
  if (g == 0) printf("pushed (%d rounds)\n", rounds);
  CK(cudaIpcCloseMemHandle(peer));
  return 0;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? atoi(argv[1]) : 10;
  int up[2], down[2];  // up: rank 1 -> rank 0, down: rank 0 -> rank 1
  if (pipe(up) != 0 || pipe(down) != 0) {
    perror("ipc_push: pipe");
    return 1;
  }
  // Fork before any CUDA call: a child may not use its parent's context.
  pid_t child = fork();
  if (child < 0) {
    perror("ipc_push: fork");
    return 1;
  }
  if (child == 0) return rank(1, down[0], up[1], rounds);
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) {
    fprintf(stderr, "ipc_push needs 2 GPUs, found %d\n", n);
    kill(child, SIGKILL);
    return 2;
  }
  int rc = rank(0, up[0], down[1], rounds), st = 0;
  waitpid(child, &st, 0);
  return rc != 0 ? rc : (WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}
