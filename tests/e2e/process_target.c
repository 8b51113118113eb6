// A job's process for the tests of `gpudx diagnose --pid` (process_view.py): loads each library named on its
// command line through the dynamic loader (so LD_LIBRARY_PATH counts, as for an application), prints
// "ready PID", then waits until its standard input closes, so the test decides how long it lives without sleeping.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// "--cuinit" after a libcuda: calls its cuInit(0), which opens the GPU's device files (device/process-view.sh).
int main(int argc, char** argv) {
    void* last = NULL;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--cuinit") == 0) {
            int (*cu_init)(unsigned) = last ? (int (*)(unsigned))dlsym(last, "cuInit") : NULL;
            if (!cu_init || cu_init(0) != 0) {
                fprintf(stderr, "process_target: cuInit failed\n");
                return 3;
            }
            continue;
        }
        last = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        if (!last) {
            fprintf(stderr, "process_target: %s\n", dlerror());
            return 2;
        }
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
    return 0;
}
