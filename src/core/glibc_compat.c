// The portable build's stand-ins for what gcc 12's static libstdc++ and libgcc take from a glibc newer than
// 2.28 (docs/release.md). Linked into every binary and library of that build only (cmake/Portable.cmake),
// with hidden visibility: each binds inside its own file, so a process that preloads the shim keeps its
// glibc's own functions, and a newer glibc underneath changes nothing.
//
// C, not C++: this sits below libstdc++ and must not need it.
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define GPUDX_COMPAT __attribute__((visibility("hidden")))

// glibc 2.32. libstdc++ skips its atomic reference counts while this says single-threaded; always saying
// "threads may exist" is what it assumes on every glibc before 2.32.
GPUDX_COMPAT char __libc_single_threaded = 0;

// glibc 2.36; std::random_device's default source. getrandom exists since Linux 3.17; /dev/urandom covers a
// seccomp policy that refuses it.
GPUDX_COMPAT uint32_t arc4random(void) {
    uint32_t value;
    unsigned char* p = (unsigned char*)&value;
    size_t got = 0;
    while (got < sizeof value) {
        ssize_t n = getrandom(p + got, sizeof value - got, 0);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        break;
    }
    if (got == sizeof value) return value;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got < sizeof value) {
        ssize_t n = read(fd, p + got, sizeof value - got);
        if (n > 0)
            got += (size_t)n;
        else if (!(n < 0 && errno == EINTR))
            break;
    }
    if (fd >= 0) close(fd);
    // arc4random cannot fail; neither may its stand-in hand out a predictable value.
    if (got != sizeof value) abort();
    return value;
}

// glibc 2.35, <dlfcn.h>. The layout of struct dl_find_object on x86-64.
struct dl_find_object {
    unsigned long long dlfo_flags;
    void* dlfo_map_start;
    void* dlfo_map_end;
    struct link_map* dlfo_link_map;
    void* dlfo_eh_frame;
    unsigned long long dlfo_reserved[7];
};

struct find_request {
    uintptr_t pc;
    struct dl_find_object* result;
};

static int find_object_containing(struct dl_phdr_info* info, size_t size, void* data) {
    (void)size;
    struct find_request* req = (struct find_request*)data;
    uintptr_t start = UINTPTR_MAX, end = 0;
    int contains = 0;
    const void* eh_frame = NULL;
    for (size_t i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_GNU_EH_FRAME) eh_frame = (const void*)lo;
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t hi = lo + ph->p_memsz;
        if (req->pc >= lo && req->pc < hi) contains = 1;
        if (lo < start) start = lo;
        if (hi > end) end = hi;
    }
    if (!contains) return 0;
    req->result->dlfo_flags = 0;
    req->result->dlfo_map_start = (void*)start;
    req->result->dlfo_map_end = (void*)end;
    req->result->dlfo_link_map = NULL;
    req->result->dlfo_eh_frame = (void*)eh_frame;
    return 1;
}

// The unwinder of gcc 12's libgcc_eh finds a frame's unwind tables only through this (no dl_iterate_phdr
// path is compiled in beside it): without it no exception could be caught. The same search glibc did before
// 2.35, through dl_iterate_phdr and each object's PT_GNU_EH_FRAME.
GPUDX_COMPAT int _dl_find_object(void* pc, struct dl_find_object* result) {
    struct find_request req = {(uintptr_t)pc, result};
    return dl_iterate_phdr(find_object_containing, &req) ? 0 : -1;
}

// glibc 2.30's waits on a chosen clock, which libstdc++'s headers call for steady_clock deadlines. Before
// 2.30 libstdc++ converted such a deadline to the system clock, and so does this: the wait itself is timed
// by CLOCK_REALTIME, so a step of the wall clock during one wait lengthens or shortens that wait (callers
// re-check their own clock and wait again).
static int realtime_deadline(clockid_t clock, const struct timespec* deadline, struct timespec* out) {
    if (clock == CLOCK_REALTIME) {
        *out = *deadline;
        return 0;
    }
    if (clock != CLOCK_MONOTONIC) return EINVAL;
    struct timespec now, wall;
    clock_gettime(CLOCK_MONOTONIC, &now);
    clock_gettime(CLOCK_REALTIME, &wall);
    long long left_ns = (long long)(deadline->tv_sec - now.tv_sec) * 1000000000LL + (deadline->tv_nsec - now.tv_nsec);
    if (left_ns < 0) left_ns = 0;
    long long ns = wall.tv_nsec + left_ns % 1000000000LL;
    out->tv_sec = wall.tv_sec + (time_t)(left_ns / 1000000000LL) + (time_t)(ns / 1000000000LL);
    out->tv_nsec = (long)(ns % 1000000000LL);
    return 0;
}

GPUDX_COMPAT int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock,
                                        const struct timespec* deadline) {
    struct timespec wall;
    int rc = realtime_deadline(clock, deadline, &wall);
    return rc ? rc : pthread_cond_timedwait(cond, mutex, &wall);
}

GPUDX_COMPAT int pthread_mutex_clocklock(pthread_mutex_t* mutex, clockid_t clock, const struct timespec* deadline) {
    struct timespec wall;
    int rc = realtime_deadline(clock, deadline, &wall);
    return rc ? rc : pthread_mutex_timedlock(mutex, &wall);
}

GPUDX_COMPAT int pthread_rwlock_clockrdlock(pthread_rwlock_t* lock, clockid_t clock, const struct timespec* deadline) {
    struct timespec wall;
    int rc = realtime_deadline(clock, deadline, &wall);
    return rc ? rc : pthread_rwlock_timedrdlock(lock, &wall);
}

GPUDX_COMPAT int pthread_rwlock_clockwrlock(pthread_rwlock_t* lock, clockid_t clock, const struct timespec* deadline) {
    struct timespec wall;
    int rc = realtime_deadline(clock, deadline, &wall);
    return rc ? rc : pthread_rwlock_timedwrlock(lock, &wall);
}
