/*
 * file.c -- the file primitives every reader and writer shares (the
 * safetensors, .npy and IDX formats, checkpoints and the kernel cache):
 * opening only regular files (a FIFO never blocks a reader, a directory is
 * an IO error), reading a whole one, and crash-safe whole-file writes -- a temp file
 * "<target>.tmp-<host>-<pid>-XXXXXX" in the target's directory, fsynced,
 * renamed over the target, then the directory fsynced; a save also removes
 * the temp files of dead writers of the same target.
 *
 * The bottom of the io layer: it knows no tensors, devices or formats, so
 * the kernel cache (cache.c) can use it without a cycle through the
 * tensor layer.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../internal.h"

int teeny__open_regular(const char *path, const char **why)
{
    struct stat sb = {0};
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int dir = S_ISDIR(sb.st_mode);
        *why = dir ? "it is a directory" : "not a regular file (a FIFO, socket or device?)";
        close(fd);
        errno = dir ? EISDIR : EINVAL;
        return -1;
    }
    /* O_NONBLOCK only kept the open from waiting on a FIFO's writer */
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

teeny_status teeny__read_file(const char *path, unsigned char **buf, size_t *len, char *msg, size_t cap)
{
    const char *why = NULL;
    struct stat sb;
    size_t size, done = 0;
    teeny_status st = TEENY_OK;
    int fd = teeny__open_regular(path, &why);
    *buf = NULL;
    *len = 0;
    if (fd < 0) {
        int err = errno;
        snprintf(msg, cap, "cannot open: %s", why);
        errno = err; /* the caller may tell a missing file from a bad one */
        return TEENY_ERR_IO;
    }
    if (fstat(fd, &sb) != 0) {
        snprintf(msg, cap, "cannot stat: %s", strerror(errno));
        st = TEENY_ERR_IO;
        goto done;
    }
    if ((uint64_t)sb.st_size > SIZE_MAX / 2) {
        snprintf(msg, cap, "too large for this host");
        st = TEENY_ERR_RANGE;
        goto done;
    }
    size = (size_t)sb.st_size;
    if (!(*buf = teeny__malloc(size + 1))) {
        snprintf(msg, cap, "out of host memory for %zu bytes", size);
        st = TEENY_ERR_NOMEM;
        goto done;
    }
    while (done < size) {
        ssize_t r = read(fd, *buf + done, size - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(msg, cap, "reading %zu bytes failed: %s", size,
                     r < 0 ? strerror(errno) : "the file shrank while being read");
            st = TEENY_ERR_IO;
            goto done;
        }
        done += (size_t)r;
    }
    (*buf)[size] = '\0';
    *len = size;
done:
    close(fd);
    if (st != TEENY_OK) {
        teeny__free(*buf);
        *buf = NULL;
    }
    return st;
}

/*
 * Temp files are "<target>.tmp-<host>-<pid>-XXXXXX": <host> is 8 hex digits
 * of the host name's hash and <pid> the writer's process id, so a later save
 * of the same target can tell a dead writer's leftover from a live one's
 * file in progress. A leftover is removed when its writer ran on this host
 * and that pid no longer exists, or when it has not been written to for
 * STALE_TEMP_SECONDS (a pid reused since, or another host's crash on a
 * shared file system): a live writer writes its temp file from start to
 * rename in one go, so it never sits untouched that long.
 */
#define STALE_TEMP_SECONDS 3600

static uint32_t host_tag(void)
{
    char name[256] = "";
    uint32_t h = 2166136261u;
    if (gethostname(name, sizeof name - 1) != 0)
        name[0] = '\0';
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

/* Split path into its directory ("." when none) and base name; frees with
 * teeny__free(*dir). */
static int split_path(const char *path, char **dir, const char **base)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 1;
    if (!(*dir = teeny__malloc(n + 2)))
        return 0;
    if (!slash)
        memcpy(*dir, ".", 2);
    else if (slash == path)
        memcpy(*dir, "/", 2);
    else {
        memcpy(*dir, path, n);
        (*dir)[n] = '\0';
    }
    *base = slash ? slash + 1 : path;
    return 1;
}

static void remove_stale_temps(const char *dir, const char *base, time_t started, uint32_t host)
{
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        const char *rest = e->d_name + blen;
        unsigned long tag = 0;
        long pid = 0;
        int used = 0;
        char full[4096];
        struct stat sb;
        if (strncmp(e->d_name, base, blen) || strncmp(rest, ".tmp-", 5))
            continue;
        /* "<host>-<pid>-XXXXXX", or the bare "XXXXXX" that earlier builds
         * wrote, whose writer is unknown: the age rule alone applies */
        if (strlen(rest + 5) != 6 &&
            (sscanf(rest + 5, "%8lx-%ld-%n", &tag, &pid, &used) != 2 || !used || strlen(rest + 5 + used) != 6 ||
             pid <= 0))
            continue; /* not one of ours */
        if ((size_t)snprintf(full, sizeof full, "%s/%s", dir, e->d_name) >= sizeof full ||
            lstat(full, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if ((pid > 0 && tag == host && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH) ||
            sb.st_mtime + STALE_TEMP_SECONDS < started) {
            if (unlink(full) == 0)
                teeny__log(TEENY_LOG_INFO, "removed %s, left by an interrupted save", full);
        }
    }
    closedir(d);
}

static int write_all(int fd, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

teeny_status teeny__write_file_atomic_msg(const char *path, const void *const *parts, const size_t *lens,
                                          int n_parts, char *msg, size_t cap)
{
    time_t started = time(NULL);
    uint32_t host = host_tag();
    char *tmp = NULL, *dir = NULL;
    const char *base;
    size_t tcap = strlen(path) + 48;
    int fd = -1, created = 0, dfd;
    if (!split_path(path, &dir, &base) || !(tmp = teeny__malloc(tcap))) {
        teeny__free(dir);
        snprintf(msg, cap, "out of host memory");
        return TEENY_ERR_NOMEM;
    }
    remove_stale_temps(dir, base, started, host);
    snprintf(tmp, tcap, "%s.tmp-%08lx-%ld-XXXXXX", path, (unsigned long)host, (long)getpid());
    fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(msg, cap, "cannot create a temp file next to it: %s", strerror(errno));
        goto fail;
    }
    created = 1;
    (void)fchmod(fd, 0644);
    for (int i = 0; i < n_parts; i++)
        if (write_all(fd, parts[i], lens[i]) != 0) {
            snprintf(msg, cap, "writing %s failed: %s", tmp, strerror(errno));
            goto fail;
        }
    if (fsync(fd) != 0) {
        snprintf(msg, cap, "fsync failed: %s", strerror(errno));
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        snprintf(msg, cap, "close failed: %s", strerror(errno));
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        snprintf(msg, cap, "renaming the temp file over it failed: %s", strerror(errno));
        goto fail;
    }
    /* Make the rename durable. Best effort: the new file is in place. */
    dfd = open(dir, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) != 0 && errno != EINVAL)
            teeny__log(TEENY_LOG_WARN, "%s: fsync of the directory failed: %s", path, strerror(errno));
        close(dfd);
    }
    teeny__free(dir);
    teeny__free(tmp);
    return TEENY_OK;
fail:
    if (fd >= 0)
        close(fd);
    if (created)
        (void)unlink(tmp);
    teeny__free(dir);
    teeny__free(tmp);
    return TEENY_ERR_IO;
}

teeny_status teeny__write_file_atomic(const teeny_ctx *ctx, const char *fn, const char *path,
                                      const void *const *parts, const size_t *lens, int n_parts)
{
    char msg[512];
    teeny_status st = teeny__write_file_atomic_msg(path, parts, lens, n_parts, msg, sizeof msg);
    return st == TEENY_OK ? st : teeny__error(ctx, st, "%s %s: %s", fn, path, msg);
}

