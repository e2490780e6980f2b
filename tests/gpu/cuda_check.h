// cuda_check.h: the error checks of the standalone CUDA tools under
// tests/gpu (sanitizer/graph_wait.cu, microbench/copy_parts.cu): a failed
// runtime (CK) or driver (CKD) call prints where and why, and exits 1.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)
#define CKD(x)                                                            \
  do {                                                                    \
    CUresult r_ = (x);                                                    \
    if (r_ != CUDA_SUCCESS) {                                             \
      const char* m_ = "";                                                \
      cuGetErrorString(r_, &m_);                                          \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, m_);     \
      exit(1);                                                            \
    }                                                                     \
  } while (0)
