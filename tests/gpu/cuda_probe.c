// Uses the GPUs it can see through the CUDA driver API, as any CUDA program starts:
// cuInit, the devices, a context and an allocation on each. Prints one line per device
// and exits 0 when every step worked; else prints the failing call and exits 1. Loads
// libcuda.so.1 with dlopen so that it builds on a host without CUDA (tests/gpu/gpu-check.sh).
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*Init)(unsigned);
typedef int (*Count)(int*);
typedef int (*Get)(int*, int);
typedef int (*Name)(char*, int, int);
typedef int (*CtxCreate)(void**, unsigned, int);
typedef int (*MemAlloc)(unsigned long long*, size_t);
typedef int (*MemFree)(unsigned long long);
typedef int (*CtxDestroy)(void*);

int main(void) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) {
    printf("cuda_probe: no driver: %s\n", dlerror());
    return 1;
  }
  Init init = (Init)dlsym(cuda, "cuInit");
  Count count = (Count)dlsym(cuda, "cuDeviceGetCount");
  Get get = (Get)dlsym(cuda, "cuDeviceGet");
  Name name = (Name)dlsym(cuda, "cuDeviceGetName");
  CtxCreate ctx_create = (CtxCreate)dlsym(cuda, "cuCtxCreate_v2");
  MemAlloc mem_alloc = (MemAlloc)dlsym(cuda, "cuMemAlloc_v2");
  MemFree mem_free = (MemFree)dlsym(cuda, "cuMemFree_v2");
  CtxDestroy ctx_destroy = (CtxDestroy)dlsym(cuda, "cuCtxDestroy_v2");
  int rc = init(0);
  if (rc != 0) {
    printf("cuda_probe: cuInit failed: error %d\n", rc);
    return 1;
  }
  int n = 0;
  if ((rc = count(&n)) != 0 || n == 0) {
    printf("cuda_probe: no devices (error %d, count %d)\n", rc, n);
    return 1;
  }
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    char buf[256] = {0};
    void* ctx = NULL;
    unsigned long long ptr = 0;
    if ((rc = get(&dev, i)) != 0 || (rc = name(buf, sizeof buf, dev)) != 0) {
      printf("cuda_probe: device %d: error %d\n", i, rc);
      return 1;
    }
    if ((rc = ctx_create(&ctx, 0, dev)) != 0 || (rc = mem_alloc(&ptr, 64 << 20)) != 0) {
      printf("cuda_probe: device %d (%s): context or 64 MB allocation failed: error %d\n", i, buf, rc);
      return 1;
    }
    mem_free(ptr);
    ctx_destroy(ctx);
    printf("cuda_probe: device %d: %s: context and 64 MB allocation ok\n", i, buf);
  }
  printf("cuda_probe: %d device(s)\n", n);
  return 0;
}
