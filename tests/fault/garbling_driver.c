/* A library named like libcuda.so.1 / libnvidia-ml.so.1 that exports none of their symbols and, as it is
 * loaded, writes garbage into the channel of the gpudx child that loads it: a driver (or memory corruption)
 * scribbling on a descriptor that is not its own. The supervised child keeps only its channel, so the one pipe
 * or socket above stderr is it. gpudx must report what it could not read, never drop it. */
#include <sys/stat.h>
#include <unistd.h>

static const char kGarbage[] = "R {not json\nZ what is this\n";

__attribute__((constructor)) static void scribble_on_the_channel(void) {
    for (int fd = 3; fd < 1024; ++fd) {
        struct stat st;
        if (fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
            ssize_t written = write(fd, kGarbage, sizeof kGarbage - 1);
            (void)written;  /* nothing to do about a failed scribble */
            return;
        }
    }
}

int gpudx_fault_garbling_driver_marker(void) { return 0; }
