/*
 * Stops a delta-rs writer with SIGSTOP at an exact point of its log-entry write (benchmarks/bench_frozen_writer.py).
 *
 * Loaded with LD_PRELOAD into the writer's Python process and armed from Python through ctypes
 * (dg_arm(point, log_dir)): the next time the process reaches `point` for a log entry under `log_dir`
 * (<log_dir><20 digits>.json), the thread that reached it stops the whole process, once.
 *
 * delta-rs 1.6.6 writes a local log entry through object_store's put-if-absent (measured with strace): it
 * creates "<entry>#<n>" (O_CREAT|O_EXCL), writes the actions, then links it to "<entry>" without
 * replacing (linkat) and unlinks the temporary name. The points:
 *   log_tmp     before the temporary entry is created (the commit is built, nothing of it is written);
 *   log_link    before the link: the whole entry is written under its temporary name, not yet visible;
 *   log_linked  after a successful link: the entry has landed, delta-rs has not returned yet.
 * raise() makes the signal thread-directed, so the thread that reached the point stops before its next
 * instruction (a process-directed kill() lets it run on until another thread takes the signal).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static char point[32];
static char log_dir[4096];
static int armed;
static int fired;

void dg_arm(const char *p, const char *dir) {
    __atomic_store_n(&armed, 0, __ATOMIC_SEQ_CST);
    strncpy(point, p, sizeof point - 1);
    strncpy(log_dir, dir, sizeof log_dir - 1);
    __atomic_store_n(&fired, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&armed, 1, __ATOMIC_SEQ_CST);
}

void dg_disarm(void) { __atomic_store_n(&armed, 0, __ATOMIC_SEQ_CST); }

int dg_fired(void) { return __atomic_load_n(&fired, __ATOMIC_SEQ_CST); }

/* path is <log_dir><20 digits>.json followed by '#' (temporary) or by nothing (the entry itself) */
static int is_entry(const char *path, int temporary) {
    size_t n = strlen(log_dir);
    if (path == NULL || strncmp(path, log_dir, n) != 0) return 0;
    path += n;
    for (int i = 0; i < 20; i++)
        if (path[i] < '0' || path[i] > '9') return 0;
    path += 20;
    if (strncmp(path, ".json", 5) != 0) return 0;
    path += 5;
    return temporary ? *path == '#' : *path == '\0';
}

static void stop_at(const char *p, const char *path, int temporary) {
    if (!__atomic_load_n(&armed, __ATOMIC_SEQ_CST) || strcmp(point, p) != 0 || !is_entry(path, temporary))
        return;
    if (__atomic_exchange_n(&armed, 0, __ATOMIC_SEQ_CST) == 0) return; /* another thread fired first */
    __atomic_store_n(&fired, 1, __ATOMIC_SEQ_CST);
    raise(SIGSTOP);
}

#define MODE_ARG                                   \
    mode_t mode = 0;                               \
    if (flags & (O_CREAT | O_TMPFILE)) {           \
        va_list ap;                                \
        va_start(ap, flags);                       \
        mode = va_arg(ap, mode_t);                 \
        va_end(ap);                                \
    }

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*linkat_fn)(int, const char *, int, const char *, int);
typedef int (*link_fn)(const char *, const char *);

#define REAL(name, type) \
    static type real;    \
    if (!real) real = (type)dlsym(RTLD_NEXT, name);

int open64(const char *path, int flags, ...) {
    REAL("open64", open_fn)
    MODE_ARG
    if (flags & O_CREAT) stop_at("log_tmp", path, 1);
    return real(path, flags, mode);
}

int open(const char *path, int flags, ...) {
    REAL("open", open_fn)
    MODE_ARG
    if (flags & O_CREAT) stop_at("log_tmp", path, 1);
    return real(path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...) {
    REAL("openat", openat_fn)
    MODE_ARG
    if (flags & O_CREAT) stop_at("log_tmp", path, 1);
    return real(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    REAL("openat64", openat_fn)
    MODE_ARG
    if (flags & O_CREAT) stop_at("log_tmp", path, 1);
    return real(dirfd, path, flags, mode);
}

int linkat(int olddirfd, const char *old, int newdirfd, const char *new, int flags) {
    REAL("linkat", linkat_fn)
    stop_at("log_link", new, 0);
    int result = real(olddirfd, old, newdirfd, new, flags);
    if (result == 0) stop_at("log_linked", new, 0);
    return result;
}

int link(const char *old, const char *new) {
    REAL("link", link_fn)
    stop_at("log_link", new, 0);
    int result = real(old, new);
    if (result == 0) stop_at("log_linked", new, 0);
    return result;
}
