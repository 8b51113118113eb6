// A job's process for the tests of `gpudx diagnose --pid` (process_view.py): loads each library named on its
// command line through the dynamic loader (so LD_LIBRARY_PATH counts, as for an application), prints
// "ready PID", then waits until its standard input closes, so the test decides how long it lives without sleeping.
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        if (!dlopen(argv[i], RTLD_NOW | RTLD_LOCAL)) {
            fprintf(stderr, "process_target: %s\n", dlerror());
            return 2;
        }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
    return 0;
}
