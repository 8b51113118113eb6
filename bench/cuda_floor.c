/* The floor of any CUDA program's start, the reference of bench/diagnose_vs_driver.sh: load the driver library, start
 * it and count the GPUs, nothing else. gpudx's `diagnose` and `ids` with CUDA are measured against this process
 * (issue #34: they should cost no more than it, since everything else gpudx reads happens while cuInit runs).
 * Exit status: 0 when the GPUs were counted, 2 no libcuda.so.1, 3 no symbol, 4 cuInit failed, 5 count failed. */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_count_fn)(int*);

int main(void) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) return 2;
    cu_init_fn init = (cu_init_fn)dlsym(lib, "cuInit");
    cu_count_fn count = (cu_count_fn)dlsym(lib, "cuDeviceGetCount");
    if (!init || !count) return 3;
    if (init(0) != 0) return 4;
    int n = 0;
    if (count(&n) != 0) return 5;
    printf("%d\n", n);
    return 0;
}
