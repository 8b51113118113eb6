/* Fault injection at the system-call boundary, for tests only: LD_PRELOAD this library into gpudx and name
 * the faults in GPUDX_TEST_FAULTS. gpudx itself carries no fault hook: the real Root, collectors and
 * renderers meet the failure exactly where the kernel would report it, and it works as root (where a
 * chmod 000 file is still readable).
 *
 *   GPUDX_TEST_FAULTS="RULE;RULE;..."   RULE = OP:ERRNO:PATTERN
 *     open:EACCES:/information     open() of any path containing PATTERN fails with ERRNO
 *     read:EIO:/current_link_speed open() succeeds, every read() of it fails with ERRNO
 *     midread:ENOENT:/uevent       the first read() returns one byte, the next fails (the file vanished)
 *   ERRNO is a name (EACCES, EPERM, ENOENT, EIO, ENODEV, ENXIO, EBUSY) or a number.
 *   GPUDX_TEST_FAULTS_LOG=FILE     appends one line per injected fault ("open EACCES PATH").
 */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

enum op { OP_OPEN, OP_READ, OP_MIDREAD };

struct rule {
    enum op op;
    int err;
    char pattern[512];
};

#define MAX_RULES 16
#define MAX_FDS 4096

static struct rule rules[MAX_RULES];
static int nrules = -1;
/* Per fd: 0 none, else 1 + index of the read/midread rule; midread_done marks the first read served. */
static unsigned char fd_rule[MAX_FDS];
static unsigned char midread_done[MAX_FDS];

static int errno_named(const char* s) {
    static const struct { const char* name; int value; } names[] = {
        {"EACCES", EACCES}, {"EPERM", EPERM}, {"ENOENT", ENOENT}, {"EIO", EIO},
        {"ENODEV", ENODEV}, {"ENXIO", ENXIO}, {"EBUSY", EBUSY}, {"EAGAIN", EAGAIN}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
        if (strcmp(s, names[i].name) == 0) return names[i].value;
    return atoi(s);
}

static void load_rules(void) {
    if (nrules >= 0) return;
    nrules = 0;
    const char* env = getenv("GPUDX_TEST_FAULTS");
    if (!env) return;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", env);
    char* save = NULL;
    for (char* r = strtok_r(buf, ";", &save); r && nrules < MAX_RULES; r = strtok_r(NULL, ";", &save)) {
        char* c1 = strchr(r, ':');
        if (!c1) continue;
        char* c2 = strchr(c1 + 1, ':');
        if (!c2) continue;
        *c1 = *c2 = '\0';
        struct rule* x = &rules[nrules];
        if (strcmp(r, "open") == 0) x->op = OP_OPEN;
        else if (strcmp(r, "read") == 0) x->op = OP_READ;
        else if (strcmp(r, "midread") == 0) x->op = OP_MIDREAD;
        else continue;
        x->err = errno_named(c1 + 1);
        snprintf(x->pattern, sizeof x->pattern, "%s", c2 + 1);
        ++nrules;
    }
}

static void log_fault(const char* what, int err, const char* path) {
    const char* file = getenv("GPUDX_TEST_FAULTS_LOG");
    if (!file) return;
    int saved = errno;
    static int (*real_open)(const char*, int, ...);
    if (!real_open) real_open = (int (*)(const char*, int, ...))dlsym(RTLD_NEXT, "open");
    int fd = real_open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        char line[1024];
        int n = snprintf(line, sizeof line, "%s %d %s\n", what, err, path);
        if (n > 0) (void)!write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        close(fd);
    }
    errno = saved;
}

/* The rule for a path and an op kind (open, or one of the read kinds), or -1. */
static int match(const char* path, int want_open) {
    load_rules();
    if (!path) return -1;
    for (int i = 0; i < nrules; ++i) {
        if ((rules[i].op == OP_OPEN) != want_open) continue;
        if (strstr(path, rules[i].pattern)) return i;
    }
    return -1;
}

static int after_open(int fd, const char* path) {
    if (fd < 0 || fd >= MAX_FDS) return fd;
    int r = match(path, 0);
    fd_rule[fd] = r < 0 ? 0 : (unsigned char)(r + 1);
    midread_done[fd] = 0;
    return fd;
}

#define OPEN_LIKE(name, ...)                                                            \
    int name(__VA_ARGS__, int flags, ...) {                                             \
        static int (*real)(PARAMS_##name);                                              \
        if (!real) real = (int (*)(PARAMS_##name))dlsym(RTLD_NEXT, #name);              \
        mode_t mode = 0;                                                                \
        if (flags & (O_CREAT | O_TMPFILE)) {                                            \
            va_list ap;                                                                 \
            va_start(ap, flags);                                                        \
            mode = va_arg(ap, mode_t);                                                  \
            va_end(ap);                                                                 \
        }                                                                               \
        int r = match(path, 1);                                                         \
        if (r >= 0) {                                                                   \
            log_fault("open", rules[r].err, path);                                      \
            errno = rules[r].err;                                                       \
            return -1;                                                                  \
        }                                                                               \
        return after_open(CALL_##name, path);                                           \
    }

#define PARAMS_open const char*, int, ...
#define PARAMS_open64 const char*, int, ...
#define PARAMS_openat int, const char*, int, ...
#define PARAMS_openat64 int, const char*, int, ...
#define CALL_open real(path, flags, mode)
#define CALL_open64 real(path, flags, mode)
#define CALL_openat real(dirfd, path, flags, mode)
#define CALL_openat64 real(dirfd, path, flags, mode)

OPEN_LIKE(open, const char* path)
OPEN_LIKE(open64, const char* path)
OPEN_LIKE(openat, int dirfd, const char* path)
OPEN_LIKE(openat64, int dirfd, const char* path)

ssize_t read(int fd, void* buf, size_t count) {
    static ssize_t (*real)(int, void*, size_t);
    if (!real) real = (ssize_t(*)(int, void*, size_t))dlsym(RTLD_NEXT, "read");
    if (fd >= 0 && fd < MAX_FDS && fd_rule[fd]) {
        struct rule* x = &rules[fd_rule[fd] - 1];
        if (x->op == OP_MIDREAD && !midread_done[fd]) {
            midread_done[fd] = 1;
            return real(fd, buf, count > 0 ? 1 : 0);
        }
        log_fault(x->op == OP_READ ? "read" : "midread", x->err, x->pattern);
        errno = x->err;
        return -1;
    }
    return real(fd, buf, count);
}

int close(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "close");
    if (fd >= 0 && fd < MAX_FDS) fd_rule[fd] = 0;
    return real(fd);
}
