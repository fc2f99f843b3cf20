/*
 * test_program.c -- the kernel-build layer: cold build, warm disk-cache hit,
 * corrupt and truncated entries rebuilt, crafted entries (a valid header
 * over a truncated or foreign binary, another family's binary with its
 * own kernel names, another build's key, a FIFO or a
 * directory in its place) rebuilt and rewritten, TEENY_NO_CACHE, concurrent
 * builders, TEENY_KERNEL_DIR (a FIFO there fails at once), the
 * build-failure path with its log, and the
 * profiler: a profile longer than its first event block, the event
 * list failing to grow, TEENY_PROFILE's log lines and
 * teeny_profile_end_each's launches.
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "harness.h"
#include "core/clwrap.h"
#include "internal.h"

const char *teeny__kernel_source(const char *family, size_t *len);

static char cache_dir[256];

static void rm_rf(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        remove(path);
    }
    closedir(d);
    rmdir(dir);
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert(f != NULL);
    ck_assert(fwrite(text, 1, len, f) == len);
    fclose(f);
}

/* Number of entries in the cache dir; the first .bin's path in *first. */
static int cache_entries(char *first, size_t cap, int *tmp_files)
{
    DIR *d = opendir(cache_dir);
    struct dirent *e;
    int n = 0;
    *tmp_files = 0;
    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 4 && !strcmp(e->d_name + len - 4, ".bin")) {
            if (!n && first)
                snprintf(first, cap, "%s/%s", cache_dir, e->d_name);
            n++;
        } else if (strstr(e->d_name, ".tmp")) {
            (*tmp_files)++;
        }
    }
    closedir(d);
    return n;
}

/* Fresh context, one elementwise kernel run and checked; returns how many
 * programs were built from source and from a cached binary. */
static void run_add(int *from_source, int *from_binary)
{
    teeny_ctx *ctx = NULL;
    int64_t shape[1] = {33};
    float a[33], b[33], y[33];
    for (int i = 0; i < 33; i++) {
        a[i] = (float)i;
        b[i] = 100.0f - (float)i;
    }
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    teeny_tensor *ta = th_tensor_from(ctx, 1, shape, a), *tb = th_tensor_from(ctx, 1, shape, b),
                 *ty = th_tensor(ctx, 1, shape);
    teeny__calls_reset();
    TH_OK(ctx, teeny_add(ctx, ta, tb, ty));
    *from_source = (int)teeny__calls_id(TEENY__ID_clCreateProgramWithSource);
    *from_binary = (int)teeny__calls_id(TEENY__ID_clCreateProgramWithBinary);
    TH_OK(ctx, teeny_tensor_read(ty, y, 33));
    for (int i = 0; i < 33; i++)
        ck_assert(y[i] == 100.0f);
    teeny_tensor_destroy(ta);
    teeny_tensor_destroy(tb);
    teeny_tensor_destroy(ty);
    teeny_ctx_destroy(ctx);
}

/* The caller's cache settings (CI points TEENY_CACHE_DIR at its build
 * folder), put back after each cache test. POCL_KERNEL_CACHE=0: on PoCL
 * the library keeps a disk copy only when PoCL's own cache is off. */
static const char *const cache_vars[] = {"TEENY_CACHE_DIR", "TEENY_NO_CACHE", "POCL_KERNEL_CACHE"};
static char saved_vars[3][512];
static int had_vars[3];

static void cache_setup(void)
{
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(cache_vars[i]);
        had_vars[i] = v != NULL;
        snprintf(saved_vars[i], sizeof saved_vars[i], "%s", v ? v : "");
    }
    snprintf(cache_dir, sizeof cache_dir, "/tmp/teenycl-test-cache-%ld/sub", (long)getpid());
    rm_rf(cache_dir);
    setenv("TEENY_CACHE_DIR", cache_dir, 1);
    unsetenv("TEENY_NO_CACHE");
    setenv("POCL_KERNEL_CACHE", "0", 1);
}

static void cache_teardown(void)
{
    char parent[256];
    rm_rf(cache_dir);
    snprintf(parent, sizeof parent, "/tmp/teenycl-test-cache-%ld", (long)getpid());
    rmdir(parent);
    for (int i = 0; i < 3; i++) {
        if (had_vars[i])
            setenv(cache_vars[i], saved_vars[i], 1);
        else
            unsetenv(cache_vars[i]);
    }
}

START_TEST(test_program_cache)
{
    int src, bin, tmp;
    char entry[512];
    cache_setup();
    run_add(&src, &bin); /* cold */
    ck_assert_int_eq(src, 1);
    ck_assert_int_eq(bin, 0);
    ck_assert_int_eq(cache_entries(entry, sizeof entry, &tmp), 1);
    ck_assert_int_eq(tmp, 0);
    run_add(&src, &bin); /* warm */
    ck_assert_int_eq(src, 0);
    ck_assert_int_eq(bin, 1);

    /* flip a byte in the middle of the entry */
    FILE *f = fopen(entry, "r+b");
    ck_assert(f != NULL);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size / 2, SEEK_SET);
    int c = fgetc(f);
    fseek(f, size / 2, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    run_add(&src, &bin);
    ck_assert_int_eq(src, 1); /* rebuilt, not trusted */
    run_add(&src, &bin);
    ck_assert_int_eq(bin, 1); /* and rewritten whole */
    ck_assert_int_eq(src, 0);

    /* truncate it */
    ck_assert(truncate(entry, size / 3) == 0);
    run_add(&src, &bin);
    ck_assert_int_eq(src, 1);
    /* empty file */
    ck_assert(truncate(entry, 0) == 0);
    run_add(&src, &bin);
    ck_assert_int_eq(src, 1);
    run_add(&src, &bin);
    ck_assert_int_eq(bin, 1);
    ck_assert_int_eq(cache_entries(NULL, 0, &tmp), 1);

    /* TEENY_NO_CACHE=1: no files, always from source */
    rm_rf(cache_dir);
    setenv("TEENY_NO_CACHE", "1", 1);
    run_add(&src, &bin);
    ck_assert_int_eq(src, 1);
    ck_assert_int_eq(cache_entries(NULL, 0, &tmp), 0);
    unsetenv("TEENY_NO_CACHE");

    /* PoCL with its own kernel cache on: no entry of ours (device.c), every other implementation one */
    teeny_device_info info = TEENY_DEVICE_INFO_INIT;
    TH_OK(th_ctx(), teeny_ctx_device_info(th_ctx(), &info));
    int pocl = strstr(info.platform_name, "Portable Computing Language") != NULL;
    unsetenv("POCL_KERNEL_CACHE");
    run_add(&src, &bin);
    ck_assert_int_eq(src, 1);
    ck_assert_int_eq(cache_entries(NULL, 0, &tmp), pocl ? 0 : 1);
    cache_teardown();
}
END_TEST

/* ---- crafted cache entries (format: src/program/cache.c's banner) ---- */

typedef struct {
    unsigned char *file;
    size_t size, key_len, names_len, payload_len;
} entry;

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static entry entry_read(const char *path)
{
    entry e = {0};
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    e.size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    e.file = th_malloc(e.size);
    ck_assert_int_eq(fread(e.file, 1, e.size, f), e.size);
    fclose(f);
    ck_assert_msg(e.size > 32 && !memcmp(e.file, "TEENYKC2", 8), "%s is not a cache entry", path);
    e.key_len = le32(e.file + 8);
    e.names_len = le32(e.file + 12);
    e.payload_len = le32(e.file + 16);
    ck_assert_uint_eq(32 + e.key_len + e.names_len + e.payload_len, e.size);
    return e;
}

/* Write header + key + names of e over payload (len bytes) to path; with
 * fix, the lengths and both checksums are made to match (a self-consistent
 * entry), else e's header is kept as it is. */
static void entry_write(const char *path, const entry *e, const unsigned char *payload, size_t len, int fix)
{
    size_t meta = 32 + e->key_len + e->names_len;
    unsigned char *out = th_malloc(meta + len);
    memcpy(out, e->file, meta);
    memcpy(out + meta, payload, len);
    if (fix) {
        put32(out + 16, (uint32_t)len);
        put32(out + 20, 0);
        put32(out + 24, (uint32_t)crc32(crc32(0, Z_NULL, 0), payload, (uInt)len));
        put32(out + 28, 0);
        put32(out + 28, (uint32_t)crc32(crc32(0, Z_NULL, 0), out, (uInt)meta));
    }
    write_text(path, (const char *)out, meta + len);
    free(out);
}

/* A second program (another family) for a foreign binary: folded batch
 * norm, checked against the formula. */
static void run_fold(void)
{
    teeny_ctx *ctx = NULL;
    int64_t shape[1] = {4};
    float w[4] = {1, 2, 3, 4}, b[4] = {0.5f, -1, 2, 0}, m[4] = {1, 0, -1, 2}, v[4] = {3, 1, 0, 8}, scale[4], shift[4];
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    teeny_tensor *tw = th_tensor_from(ctx, 1, shape, w), *tb = th_tensor_from(ctx, 1, shape, b),
                 *tm = th_tensor_from(ctx, 1, shape, m), *tv = th_tensor_from(ctx, 1, shape, v),
                 *ts = th_tensor(ctx, 1, shape), *th = th_tensor(ctx, 1, shape);
    TH_OK(ctx, teeny_batchnorm_fold(ctx, tw, tb, tm, tv, 1.0f, ts, th));
    TH_OK(ctx, teeny_tensor_read(ts, scale, 4));
    TH_OK(ctx, teeny_tensor_read(th, shift, 4));
    for (int i = 0; i < 4; i++) {
        double sc = w[i] / sqrt((double)v[i] + 1.0);
        ck_assert(fabs(scale[i] - sc) < 1e-5 && fabs(shift[i] - (b[i] - m[i] * sc)) < 1e-5);
    }
    teeny_tensor *all[6] = {tw, tb, tm, tv, ts, th};
    for (int i = 0; i < 6; i++)
        teeny_tensor_destroy(all[i]);
    teeny_ctx_destroy(ctx);
}

/* The add program is rebuilt from source (and gives the right answer), and
 * its entry rewritten so that the next context loads it from the cache. */
static void expect_rebuilt(const char *entry_path, const char *what)
{
    int src, bin, tmp;
    struct stat sb;
    run_add(&src, &bin);
    ck_assert_msg(src == 1, "%s: the program was not rebuilt from source", what);
    ck_assert_msg(stat(entry_path, &sb) == 0 && S_ISREG(sb.st_mode), "%s: the entry was not rewritten", what);
    run_add(&src, &bin);
    ck_assert_msg(src == 0 && bin == 1, "%s: the rewritten entry was not used (source %d, binary %d)", what, src, bin);
    cache_entries(NULL, 0, &tmp);
    ck_assert_msg(tmp == 0, "%s: %d temp files left", what, tmp);
}

START_TEST(test_program_cache_crafted)
{
    int src, bin, tmp;
    char add_path[512], other_path[512];
    cache_setup();
    run_add(&src, &bin);
    ck_assert_int_eq(cache_entries(add_path, sizeof add_path, &tmp), 1);
    run_fold();
    {   /* the entry that is not add's */
        DIR *d = opendir(cache_dir);
        struct dirent *e;
        other_path[0] = '\0';
        while ((e = readdir(d)) != NULL) {
            char p[512];
            snprintf(p, sizeof p, "%s/%s", cache_dir, e->d_name);
            if (strstr(e->d_name, ".bin") && strcmp(p, add_path))
                snprintf(other_path, sizeof other_path, "%s", p);
        }
        closedir(d);
    }
    ck_assert_msg(other_path[0], "the second program left no entry");
    entry add = entry_read(add_path), other = entry_read(other_path);
    const unsigned char *add_bin = add.file + add.size - add.payload_len;
    const unsigned char *other_bin = other.file + other.size - other.payload_len;

    /* a valid header over a truncated binary (the file cut short) */
    entry_write(add_path, &add, add_bin, add.payload_len / 2, 0);
    expect_rebuilt(add_path, "truncated payload");
    /* (Not tested: half a binary with the lengths and checksums recomputed
     * to match reaches the driver, and PoCL 3.1 aborts on it in
     * pocl_binary.c: only a keyed MAC could stop a deliberately forged
     * entry, and whoever can write the cache can replace the library too.) */
    /* another program's binary under this key's header, checksums stale */
    entry_write(add_path, &add, other_bin, other.payload_len, 0);
    expect_rebuilt(add_path, "foreign payload");
    /* the same made self-consistent: it builds, but holds other kernels */
    entry_write(add_path, &add, other_bin, other.payload_len, 1);
    expect_rebuilt(add_path, "self-consistent foreign payload");
    /* and with the other program's kernel names too: the names stored
     * agree with the binary, but add's family declares none of them */
    {
        entry forged = add;
        size_t key_end = 32 + add.key_len;
        forged.names_len = other.names_len;
        forged.file = th_malloc(key_end + other.names_len);
        memcpy(forged.file, add.file, key_end);
        memcpy(forged.file + key_end, other.file + 32 + other.key_len, other.names_len);
        put32(forged.file + 12, (uint32_t)other.names_len);
        entry_write(add_path, &forged, other_bin, other.payload_len, 1);
        free(forged.file);
        expect_rebuilt(add_path, "another family's binary and kernel names");
    }
    /* this entry with its key changed (another driver version, say) and
     * the checksums made to match */
    add.file[32 + add.key_len - 2] ^= 1;
    entry_write(add_path, &add, add_bin, add.payload_len, 1);
    add.file[32 + add.key_len - 2] ^= 1;
    expect_rebuilt(add_path, "wrong key");
    /* another build's whole entry under this name */
    write_text(add_path, (const char *)other.file, other.size);
    expect_rebuilt(add_path, "another entry");
    /* a FIFO in the entry's place must not block; it is replaced */
    remove(add_path);
    ck_assert_int_eq(mkfifo(add_path, 0600), 0);
    alarm(120);
    expect_rebuilt(add_path, "FIFO");
    alarm(0);
    /* a directory there: rebuilt each time, the write fails quietly */
    remove(add_path);
    ck_assert_int_eq(mkdir(add_path, 0700), 0);
    run_add(&src, &bin);
    ck_assert_int_eq(src, 1);
    cache_entries(NULL, 0, &tmp);
    ck_assert_int_eq(tmp, 0);
    rmdir(add_path);

    free(add.file);
    free(other.file);
    cache_teardown();
}
END_TEST

static void *builder(void *arg)
{
    int src, bin;
    run_add(&src, &bin);
    *(int *)arg = src + bin;
    return NULL;
}

/* Several builders at once over a cold cache: all succeed, one valid entry
 * remains, no temp files. */
START_TEST(test_program_cache_concurrent)
{
    enum { T = 4 };
    pthread_t th[T];
    int built[T];
    int src, bin, tmp;
    cache_setup();
    for (int i = 0; i < T; i++)
        ck_assert(pthread_create(&th[i], NULL, builder, &built[i]) == 0);
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(built[i], 1);
    }
    ck_assert_int_eq(cache_entries(NULL, 0, &tmp), 1);
    ck_assert_int_eq(tmp, 0);
    run_add(&src, &bin);
    ck_assert_int_eq(bin, 1);
    cache_teardown();
}
END_TEST

/* A kernel that fails to compile: TEENY_ERR_BUILD with the device, the
 * options and the compiler's log in the message. */
START_TEST(test_program_build_failure)
{
    char dir[256], path[300];
    size_t len;
    const char *common = teeny__kernel_source("common", &len);
    const char *bad = "__kernel void ew_add(__global float *y) { y[0] = this_is_not_defined + ; }\n";
    ck_assert(common != NULL);
    snprintf(dir, sizeof dir, "/tmp/teenycl-test-kernels-%ld", (long)getpid());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/common.cl", dir);
    write_text(path, common, len);
    snprintf(path, sizeof path, "%s/elementwise.cl", dir);
    write_text(path, bad, strlen(bad));
    setenv("TEENY_KERNEL_DIR", dir, 1);
    setenv("TEENY_NO_CACHE", "1", 1);

    teeny_ctx *ctx = NULL;
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    int64_t shape[1] = {4};
    teeny_tensor *a = th_tensor(ctx, 1, shape);
    TH_OK(ctx, teeny_tensor_fill(a, 1.0f));
    float before[4], after[4];
    TH_OK(ctx, teeny_tensor_read(a, before, 4));
    TH_STATUS(ctx, TEENY_ERR_BUILD, teeny_add(ctx, a, a, a));
    const char *msg = teeny_last_error(ctx);
    ck_assert_msg(strstr(msg, teeny_ctx_device_name(ctx)) != NULL, "no device in: %s", msg);
    ck_assert_msg(strstr(msg, "-cl-std=CL1.2") != NULL, "no options in: %s", msg);
    ck_assert_msg(strstr(msg, "this_is_not_defined") != NULL, "no compiler log in: %s", msg);
    TH_OK(ctx, teeny_tensor_read(a, after, 4));
    ck_assert(!memcmp(before, after, sizeof before));

    /* a family missing from TEENY_KERNEL_DIR is an I/O error */
    teeny_tensor *y = th_tensor(ctx, 1, shape), *z = th_tensor(ctx, 1, shape);
    TH_STATUS(ctx, TEENY_ERR_IO, teeny_batchnorm_fold(ctx, a, a, a, a, 1e-5f, y, z));
    ck_assert_msg(strstr(teeny_last_error(ctx), "batchnorm.cl") != NULL, "%s", teeny_last_error(ctx));
    teeny_tensor_destroy(z);
    unsetenv("TEENY_KERNEL_DIR");
    unsetenv("TEENY_NO_CACHE");
    teeny_tensor_destroy(a);
    teeny_tensor_destroy(y);
    teeny_ctx_destroy(ctx);
    remove(path);
    snprintf(path, sizeof path, "%s/common.cl", dir);
    remove(path);
    rmdir(dir);
}
END_TEST

/* A FIFO named <family>.cl in TEENY_KERNEL_DIR (no writer: a plain open
 * blocks forever): the build fails at once with TEENY_ERR_IO naming the
 * file and why, and changes nothing. SIGALRM ends the run if it blocks. */
START_TEST(test_program_kernel_dir_fifo)
{
    char dir[256], path[300];
    size_t len;
    const char *common = teeny__kernel_source("common", &len);
    ck_assert(common != NULL);
    snprintf(dir, sizeof dir, "/tmp/teenycl-test-kfifo-%ld", (long)getpid());
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/common.cl", dir);
    write_text(path, common, len);
    snprintf(path, sizeof path, "%s/elementwise.cl", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    setenv("TEENY_KERNEL_DIR", dir, 1);
    setenv("TEENY_NO_CACHE", "1", 1);

    teeny_ctx *ctx = NULL;
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    int64_t shape[1] = {4};
    teeny_tensor *a = th_tensor(ctx, 1, shape), *y = th_tensor(ctx, 1, shape);
    TH_OK(ctx, teeny_tensor_fill(a, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(y, -3.0f));
    alarm(60);
    double t0 = (double)time(NULL);
    TH_STATUS(ctx, TEENY_ERR_IO, teeny_add(ctx, a, a, y));
    alarm(0);
    ck_assert_msg((double)time(NULL) - t0 < 5.0, "the build took %.0f s", (double)time(NULL) - t0);
    const char *msg = teeny_last_error(ctx);
    ck_assert_msg(strstr(msg, path) && strstr(msg, "TEENY_KERNEL_DIR") && strstr(msg, "not a regular file"),
                  "message: %s", msg);
    th_expect_all(y, -3.0f);
    unsetenv("TEENY_KERNEL_DIR");
    unsetenv("TEENY_NO_CACHE");
    teeny_tensor_destroy(a);
    teeny_tensor_destroy(y);
    teeny_ctx_destroy(ctx);
    remove(path);
    snprintf(path, sizeof path, "%s/common.cl", dir);
    remove(path);
    rmdir(dir);
}
END_TEST

/* The profiler keeps every launch: more than its first 4,096-event block
 * (it used to stop there and under-report), and a second profile starts
 * from zero. */
START_TEST(test_program_profile_many)
{
    enum { LAUNCHES = 5200 };
    teeny_ctx *ctx = th_ctx();
    int64_t shape[1] = {64};
    teeny_tensor *a = th_tensor(ctx, 1, shape), *y = th_tensor(ctx, 1, shape);
    float out[64];
    double ms = -1.0;
    int kernels = -1;
    TH_OK(ctx, teeny_tensor_fill(a, 1.0f));
    th_poison(y);
    TH_OK(ctx, teeny_add(ctx, a, a, y)); /* built before profiling */
    TH_OK(ctx, teeny_ctx_finish(ctx));
    TH_OK(ctx, teeny_profile_begin(ctx));
    for (int i = 0; i < LAUNCHES; i++)
        TH_OK(ctx, teeny_add(ctx, a, a, y)); /* one ew_add launch each */
    TH_OK(ctx, teeny_profile_end(ctx, &ms, &kernels));
    ck_assert_int_eq(kernels, LAUNCHES);
    ck_assert_msg(ms > 0.0 && isfinite(ms), "device time %g ms", ms);
    TH_OK(ctx, teeny_tensor_read(y, out, 64));
    for (int i = 0; i < 64; i++)
        ck_assert_msg(out[i] == 2.0f, "y[%d] = %g", i, (double)out[i]);

    kernels = -1;
    TH_OK(ctx, teeny_profile_begin(ctx));
    TH_OK(ctx, teeny_add(ctx, a, a, y));
    TH_OK(ctx, teeny_profile_end(ctx, NULL, &kernels));
    ck_assert_int_eq(kernels, 1);
    teeny_tensor_destroy(a);
    teeny_tensor_destroy(y);
}
END_TEST

/* TEENY_PROFILE=2 logs every launch in order (kernel, work-items,
 * device time) before the per-kernel summary; 1 logs only the summary. */
typedef struct {
    char lines[8][160];
    int launches, summaries;
} profile_log;

static void profile_sink(teeny_log_level level, const char *msg, void *ud)
{
    profile_log *l = ud;
    (void)level;
    if (strstr(msg, "profile: launch ")) {
        if (l->launches < 8)
            snprintf(l->lines[l->launches], sizeof l->lines[0], "%s", msg);
        l->launches++;
    } else if (strstr(msg, "profile: ") && strstr(msg, " kernels, "))
        l->summaries++;
}

/* What teeny_profile_end_each hands over, copied (the strings are
 * borrowed for the call). */
typedef struct {
    int n, index[4];
    long long items[4];
    double ms[4], gap[4];
    char kernel[4][64];
    const char *node[4];
} profile_seen;

static void profile_each(const teeny_profile_launch *l, void *user)
{
    profile_seen *s = user;
    if (s->n < 4) {
        s->index[s->n] = l->index;
        s->items[s->n] = l->items;
        s->ms[s->n] = l->ms;
        s->gap[s->n] = l->gap_ms;
        snprintf(s->kernel[s->n], sizeof s->kernel[0], "%s", l->kernel);
        s->node[s->n] = l->node;
    }
    s->n++;
}

START_TEST(test_program_profile_each_launch)
{
    teeny_ctx *ctx = th_ctx();
    int64_t small[1] = {64}, large[1] = {4096};
    teeny_tensor *a = th_tensor(ctx, 1, small), *y = th_tensor(ctx, 1, small);
    teeny_tensor *b = th_tensor(ctx, 1, large), *z = th_tensor(ctx, 1, large);
    static profile_log log;
    TH_OK(ctx, teeny_tensor_fill(a, 1.0f));
    TH_OK(ctx, teeny_tensor_fill(b, 1.0f));
    TH_OK(ctx, teeny_add(ctx, a, a, y)); /* built before profiling */
    TH_OK(ctx, teeny_ctx_finish(ctx));
    for (int mode = 1; mode <= 2; mode++) {
        memset(&log, 0, sizeof log);
        setenv("TEENY_PROFILE", mode == 1 ? "1" : "2", 1);
        teeny_log_set(profile_sink, &log);
        TH_OK(ctx, teeny_profile_begin(ctx));
        TH_OK(ctx, teeny_add(ctx, a, a, y));
        TH_OK(ctx, teeny_add(ctx, b, b, z));
        TH_OK(ctx, teeny_profile_end(ctx, NULL, NULL));
        teeny_log_set(NULL, NULL);
        unsetenv("TEENY_PROFILE");
        ck_assert_int_eq(log.summaries, 1);
        ck_assert_int_eq(log.launches, mode == 1 ? 0 : 2);
    }
    /* in order, each with its kernel, work-items (more for the 4096-float
     * add), time and the idle gap before it (none before the first) */
    long long items[2];
    for (int i = 0; i < 2; i++) {
        char name[64];
        int idx = -1;
        double ms = -1, gap = -1;
        ck_assert_msg(sscanf(strstr(log.lines[i], "launch "), "launch %d %63s %lld items %lf ms gap %lf ms", &idx,
                             name, &items[i], &ms, &gap) == 5, "line: %s", log.lines[i]);
        ck_assert_int_eq(idx, i);
        ck_assert_msg(ms >= 0 && gap >= 0 && (i || gap == 0), "line: %s", log.lines[i]);
        ck_assert_msg(!strncmp(name, "ew_add", 6), "kernel %s", name); /* ew_add or its CPU twin */
    }
    ck_assert_msg(items[0] >= 1 && items[1] > items[0], "items %lld, %lld", items[0], items[1]);

    /* teeny_profile_end_each hands the same launches to a callback, in
     * order (no environment: the variable is unset), and nothing without a
     * profile begun */
    profile_seen seen;
    double span = -1;
    int kernels = -1;
    memset(&seen, 0, sizeof seen);
    TH_OK(ctx, teeny_profile_begin(ctx));
    TH_OK(ctx, teeny_add(ctx, a, a, y));
    TH_OK(ctx, teeny_add(ctx, b, b, z));
    TH_OK(ctx, teeny_profile_end_each(ctx, &span, &kernels, profile_each, &seen));
    ck_assert_int_eq(kernels, 2);
    ck_assert_int_eq(seen.n, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(seen.index[i], i);
        ck_assert_int_eq((int)seen.items[i], (int)items[i]);
        ck_assert_msg(!strncmp(seen.kernel[i], "ew_add", 6), "kernel %s", seen.kernel[i]);
        ck_assert_msg(!seen.node[i], "an eager launch has no graph node");
        ck_assert_msg(seen.ms[i] >= 0 && seen.gap[i] >= 0 && (i || seen.gap[i] == 0), "launch %d: %g ms gap %g", i,
                      seen.ms[i], seen.gap[i]);
    }
    ck_assert_msg(seen.ms[0] + seen.gap[1] + seen.ms[1] <= span + 1e-3, "%g + %g + %g ms in a %g ms span", seen.ms[0],
                  seen.gap[1], seen.ms[1], span);
    memset(&seen, 0, sizeof seen);
    ck_assert_int_eq(teeny_profile_end_each(ctx, NULL, NULL, profile_each, &seen), TEENY_ERR_STATE);
    ck_assert_int_eq(seen.n, 0);
    TH_OK(ctx, teeny_profile_begin(ctx));
    TH_OK(ctx, teeny_add(ctx, a, a, y));
    TH_OK(ctx, teeny_profile_end_each(ctx, NULL, &kernels, NULL, NULL));
    ck_assert_int_eq(kernels, 1);
    teeny_tensor_destroy(a);
    teeny_tensor_destroy(y);
    teeny_tensor_destroy(b);
    teeny_tensor_destroy(z);
}
END_TEST

/* Growing the event list can fail (host memory): the launch still runs,
 * teeny_profile_end returns TEENY_ERR_NOMEM and says how many launches are
 * missing instead of reporting a short count, writes neither output, and
 * the next profile is whole. The fault goes into each hooked call of the
 * launch that must grow the list in turn, until it hits the growth. */
START_TEST(test_program_profile_grow_fails)
{
    teeny_ctx *ctx = th_ctx();
    int64_t shape[1] = {64};
    teeny_tensor *a = th_tensor(ctx, 1, shape), *y = th_tensor(ctx, 1, shape);
    float out[64];
    double ms = -1.0;
    int kernels = -1;
    teeny_status st = TEENY_OK;
    TH_OK(ctx, teeny_tensor_fill(a, 1.0f));
    th_poison(y);
    TH_OK(ctx, teeny_add(ctx, a, a, y)); /* built before profiling */
    TH_OK(ctx, teeny_ctx_finish(ctx));
    TH_OK(ctx, teeny_profile_begin(ctx));
    for (long k = 1; !ctx->prog.prof_lost; k++) {
        while (ctx->prog.prof_count + 1 < ctx->prog.prof_cap) /* the next event needs a larger list */
            TH_OK(ctx, teeny_add(ctx, a, a, y));
        teeny__fault_arm(k);
        st = teeny_add(ctx, a, a, y);
        int fired = teeny__fault_fired();
        teeny__fault_arm(0);
        ck_assert_msg(fired, "fault at call %ld: the launch ended without reaching the list's growth", k);
    }
    ck_assert_int_eq(ctx->prog.prof_lost, 1);
    TH_OK(ctx, st); /* the launch itself stands */
    int recorded = ctx->prog.prof_count;
    for (int i = 0; i < 8; i++)
        TH_OK(ctx, teeny_add(ctx, a, a, y)); /* the list grows again */
    ck_assert_int_eq(ctx->prog.prof_count, recorded + 8);
    ck_assert_int_eq(teeny_profile_end(ctx, &ms, &kernels), TEENY_ERR_NOMEM);
    ck_assert_msg(strstr(teeny_last_error(ctx), "1 launch is missing") != NULL, "message: %s", teeny_last_error(ctx));
    ck_assert_int_eq(kernels, -1);
    ck_assert(ms == -1.0);
    TH_OK(ctx, teeny_tensor_read(y, out, 64));
    for (int i = 0; i < 64; i++)
        ck_assert_msg(out[i] == 2.0f, "y[%d] = %g", i, (double)out[i]);

    TH_OK(ctx, teeny_profile_begin(ctx));
    TH_OK(ctx, teeny_add(ctx, a, a, y));
    TH_OK(ctx, teeny_profile_end(ctx, &ms, &kernels));
    ck_assert_int_eq(kernels, 1);
    ck_assert_msg(ms >= 0.0 && isfinite(ms), "device time %g ms", ms);
    teeny_tensor_destroy(a);
    teeny_tensor_destroy(y);
}
END_TEST

Suite *suite_program(void)
{
    Suite *s = suite_create("program");
    TCase *tc = tcase_create("cache"), *err = tcase_create("errors");
    tcase_add_test(tc, test_program_cache);
    tcase_add_test(tc, test_program_cache_concurrent);
    tcase_add_test(tc, test_program_cache_crafted);
    tcase_add_test(tc, test_program_profile_many);
    tcase_add_test(tc, test_program_profile_grow_fails);
    tcase_add_test(tc, test_program_profile_each_launch);
    tcase_add_test(err, test_program_build_failure);
    tcase_add_test(err, test_program_kernel_dir_fifo);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, err);
    return s;
}
