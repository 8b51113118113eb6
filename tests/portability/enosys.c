// enosys COMMAND [ARG...]: runs COMMAND as Linux 4.18 (RHEL 8's kernel) would, as far as system calls go:
// every call x86-64 gained after 4.18 (io_uring, pidfd_*, clone3, close_range, openat2, faccessat2, ...)
// answers ENOSYS. A seccomp filter, inherited by every child and kept across exec, so gpudx, its probe
// children, the checkpoint worker and glibc itself all take their fallbacks (tests/portability).
//
// enosys --self-test: exits 0 only when the filter is in force (close_range and clone3 answer ENOSYS and an
// old call still works), so the tests that use it cannot pass with a filter that does nothing.
#define _GNU_SOURCE 1
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>  // __NR_*: the kernel's numbers (glibc 2.31's SYS_* predate close_range)
#include <unistd.h>

// 334 (rseq) is 4.18's last system call; 335-423 were never assigned on x86-64.
enum { kFirstCallAfterLinux418 = 335 };

static int install_filter(void) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, kFirstCallAfterLinux418, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {(unsigned short)(sizeof filter / sizeof filter[0]), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program);
}

static int self_test(void) {
    int failures = 0;
    errno = 0;
    if (syscall(__NR_close_range, 1000u, 1000u, 0u) != -1 || errno != ENOSYS) {
        fprintf(stderr, "enosys: close_range was not refused (errno %d)\n", errno);
        ++failures;
    }
    errno = 0;
    if (syscall(__NR_clone3, NULL, 0) != -1 || errno != ENOSYS) {
        fprintf(stderr, "enosys: clone3 was not refused (errno %d)\n", errno);
        ++failures;
    }
    if (getppid() <= 0) {
        fprintf(stderr, "enosys: getppid failed under the filter\n");
        ++failures;
    }
    return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: enosys --self-test | COMMAND [ARG...]\n");
        return 2;
    }
    if (install_filter() != 0) {
        fprintf(stderr, "enosys: cannot install the seccomp filter: %s\n", strerror(errno));
        return 1;
    }
    if (strcmp(argv[1], "--self-test") == 0) return self_test();
    execvp(argv[1], argv + 1);
    fprintf(stderr, "enosys: %s: %s\n", argv[1], strerror(errno));
    return 127;
}
