/*
 * program.c -- the kernel-build layer: embedded OpenCL C sources, per-device
 * builds with -D specialization options, an in-memory program/kernel cache
 * per context, an on-disk binary cache, and launch helpers.
 *
 * Disk cache: $TEENY_CACHE_DIR, else $XDG_CACHE_HOME/teenycl, else
 * ~/.cache/teenycl; TEENY_NO_CACHE=1 turns it off. An entry is named by a
 * 128-bit hash of its key and holds (little-endian):
 *   "TEENYKC2", u32 key length, u32 names length, u64 payload length,
 *   u32 crc32 of the payload, u32 crc32 of everything before the payload
 *   (this field zeroed), the key, the kernel names, the program binary.
 * The key is the text "library version, source hash, options, device,
 * platform, driver" in full, so an entry answers only the exact build it was
 * made for, whatever its file name; the kernel names are what the program
 * built from source holds, so a foreign binary under the right key is
 * caught after it builds. Every length is checked against the file size
 * before anything is allocated. Entries are written with the library's
 * atomic writer (temp file, fsync, rename, fsync of the directory), so
 * concurrent processes never see half an entry. An entry that fails any
 * check, that is not a regular file, or that the driver rejects in any way
 * is a miss: the program is rebuilt from source and the entry overwritten.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <zlib.h>

#include "internal.h"

typedef struct {
    const char *name;
    const unsigned char *data;
    size_t len;
} teeny__embedded_source;

/* Generated at build time from cl/ *.cl (build/gen/kernels.c). */
extern const teeny__embedded_source teeny__sources[];
extern const int teeny__n_sources;

#define MAX_KERNELS_PER_PROGRAM 32

typedef struct {
    char name[64];
    cl_kernel kernel;
    teeny__klimits limits; /* queried once, at creation */
} cached_kernel;

struct teeny__program {
    teeny__program *next;
    char family[32];
    char *options;
    cl_program program;
    int n_kernels;
    cached_kernel kernels[MAX_KERNELS_PER_PROGRAM];
};

static const char CACHE_MAGIC[8] = {'T', 'E', 'E', 'N', 'Y', 'K', 'C', '2'};
#define CACHE_HEADER 32
#define CACHE_KEY_MAX 65536
#define CACHE_NAMES_MAX (1u << 20)

/* ---- sources ---- */

const char *teeny__kernel_source(const char *family, size_t *len)
{
    for (int i = 0; i < teeny__n_sources; i++)
        if (!strcmp(teeny__sources[i].name, family)) {
            if (len)
                *len = teeny__sources[i].len;
            return (const char *)teeny__sources[i].data;
        }
    return NULL;
}

/* Read a whole file into a NUL-terminated buffer (caller frees). */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long size;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        goto done;
    buf = teeny__malloc((size_t)size + 1);
    if (!buf)
        goto done;
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        teeny__free(buf);
        buf = NULL;
        goto done;
    }
    buf[size] = '\0';
    *len = (size_t)size;
done:
    fclose(f);
    return buf;
}

/* common.cl followed by <family>.cl, from TEENY_KERNEL_DIR when set. */
static teeny_status program_source(teeny_ctx *ctx, const char *family, char **out)
{
    const char *dir = getenv("TEENY_KERNEL_DIR");
    const char *parts[2] = {"common", family};
    char *text[2] = {NULL, NULL};
    size_t lens[2] = {0, 0};
    teeny_status st = TEENY_OK;

    for (int i = 0; i < 2; i++) {
        if (dir && *dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.cl", dir, parts[i]);
            text[i] = read_file(path, &lens[i]);
            if (!text[i]) {
                st = teeny__error(ctx, TEENY_ERR_IO, "cannot read kernel source %s (TEENY_KERNEL_DIR)", path);
                goto cleanup;
            }
        } else {
            const char *src = teeny__kernel_source(parts[i], &lens[i]);
            if (!src) {
                st = teeny__error(ctx, TEENY_ERR_STATE, "no embedded kernel source for family \"%s\"", parts[i]);
                goto cleanup;
            }
            text[i] = teeny__malloc(lens[i] + 1);
            if (!text[i]) {
                st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory copying kernel source");
                goto cleanup;
            }
            memcpy(text[i], src, lens[i] + 1);
        }
    }
    *out = teeny__malloc(lens[0] + lens[1] + 2);
    if (!*out) {
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory joining kernel sources");
        goto cleanup;
    }
    memcpy(*out, text[0], lens[0]);
    (*out)[lens[0]] = '\n';
    memcpy(*out + lens[0] + 1, text[1], lens[1] + 1);
cleanup:
    teeny__free(text[0]);
    teeny__free(text[1]);
    return st;
}

/* ---- hashing ---- */

static uint64_t hash_str(uint64_t h, const char *s)
{
    return teeny__fnv1a64(h, s, strlen(s) + 1); /* the NUL separates fields */
}

/* ---- disk cache ---- */

void teeny__cache_dir(char *out, size_t cap)
{
    const char *no = getenv("TEENY_NO_CACHE");
    const char *dir = getenv("TEENY_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    out[0] = '\0';
    if (no && *no && strcmp(no, "0"))
        return;
    if (dir && *dir)
        snprintf(out, cap, "%s", dir);
    else if (xdg && *xdg)
        snprintf(out, cap, "%s/teenycl", xdg);
    else if (home && *home)
        snprintf(out, cap, "%s/.cache/teenycl", home);
}

static int mkdir_p(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

static uint32_t get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t crc(uint32_t c, const unsigned char *p, size_t n)
{
    while (n > 0) { /* zlib's crc32 takes a uInt length */
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = (uint32_t)crc32(c, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return c;
}

/* The crc32 of an entry's header fields (its own slot zeroed), key and names. */
static uint32_t header_crc(const unsigned char *head, const char *key, size_t key_len, const char *names,
                           size_t names_len)
{
    unsigned char h[CACHE_HEADER];
    uint32_t c = (uint32_t)crc32(0, Z_NULL, 0);
    memcpy(h, head, CACHE_HEADER);
    put_le32(h + 28, 0);
    c = crc(c, h, CACHE_HEADER);
    c = crc(c, (const unsigned char *)key, key_len);
    return crc(c, (const unsigned char *)names, names_len);
}

/* A cached entry for key: its binary and kernel names (caller frees both),
 * or 0 when absent or unusable (then rebuilt and overwritten). */
static int cache_load(const char *path, const char *key, unsigned char **bin, size_t *len, char **names)
{
    const char *why = NULL;
    unsigned char *file = NULL;
    struct stat sb;
    size_t size, done = 0, key_len = strlen(key), names_len;
    uint64_t payload_len;
    int fd = teeny__open_regular(path, &why), ok = 0;
    *bin = NULL;
    *names = NULL;
    if (fd < 0) {
        if (errno != ENOENT)
            teeny__log(TEENY_LOG_WARN, "kernel cache entry %s: %s; rebuilding", path, why);
        return 0;
    }
    if (fstat(fd, &sb) != 0 || sb.st_size < CACHE_HEADER || (uint64_t)sb.st_size > SIZE_MAX / 2) {
        why = "too short";
        goto done;
    }
    size = (size_t)sb.st_size;
    if (!(file = teeny__malloc(size))) {
        why = "out of host memory";
        goto done;
    }
    while (done < size) {
        ssize_t r = read(fd, file + done, size - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        done += (size_t)r;
    }
    why = "truncated, padded or not an entry";
    if (done != size || memcmp(file, CACHE_MAGIC, 8) != 0)
        goto done;
    names_len = get_le32(file + 12);
    payload_len = (uint64_t)get_le32(file + 16) | (uint64_t)get_le32(file + 20) << 32;
    /* every length against the file size before use */
    if (get_le32(file + 8) != key_len || key_len > CACHE_KEY_MAX || names_len > CACHE_NAMES_MAX ||
        payload_len == 0 || payload_len != size - CACHE_HEADER - key_len - names_len ||
        size < CACHE_HEADER + key_len + names_len)
        goto done;
    why = "corrupt header or key";
    if (header_crc(file, (const char *)file + CACHE_HEADER, key_len, (const char *)file + CACHE_HEADER + key_len,
                   names_len) != get_le32(file + 28))
        goto done;
    why = "made for another build (key differs)";
    if (memcmp(file + CACHE_HEADER, key, key_len) != 0)
        goto done;
    why = "corrupt binary (checksum)";
    if (crc((uint32_t)crc32(0, Z_NULL, 0), file + size - payload_len, (size_t)payload_len) != get_le32(file + 24))
        goto done;
    why = "out of host memory";
    *bin = teeny__malloc((size_t)payload_len);
    *names = teeny__malloc(names_len + 1);
    if (!*bin || !*names)
        goto done;
    memcpy(*bin, file + size - payload_len, (size_t)payload_len);
    memcpy(*names, file + CACHE_HEADER + key_len, names_len);
    (*names)[names_len] = '\0';
    *len = (size_t)payload_len;
    ok = 1;
done:
    close(fd);
    teeny__free(file);
    if (!ok) {
        teeny__log(TEENY_LOG_WARN, "kernel cache entry %s: %s; rebuilding it", path, why);
        teeny__free(*bin);
        teeny__free(*names);
        *bin = NULL;
        *names = NULL;
    }
    return ok;
}

static void cache_store(const char *dir, const char *path, const char *key, const char *names,
                        const unsigned char *bin, size_t len)
{
    unsigned char head[CACHE_HEADER];
    size_t key_len = strlen(key), names_len = strlen(names);
    char msg[512];
    if (mkdir_p(dir) != 0) {
        teeny__log(TEENY_LOG_INFO, "kernel cache: cannot create %s: %s", dir, strerror(errno));
        return;
    }
    memcpy(head, CACHE_MAGIC, 8);
    put_le32(head + 8, (uint32_t)key_len);
    put_le32(head + 12, (uint32_t)names_len);
    put_le32(head + 16, (uint32_t)((uint64_t)len & 0xffffffffu));
    put_le32(head + 20, (uint32_t)((uint64_t)len >> 32));
    put_le32(head + 24, crc((uint32_t)crc32(0, Z_NULL, 0), bin, len));
    put_le32(head + 28, header_crc(head, key, key_len, names, names_len));
    {
        const void *parts[4] = {head, key, names, bin};
        size_t lens[4] = {CACHE_HEADER, key_len, names_len, len};
        if (teeny__write_file_atomic_msg(path, parts, lens, 4, msg, sizeof msg) != TEENY_OK)
            teeny__log(TEENY_LOG_INFO, "kernel cache: cannot write %s: %s", path, msg);
    }
}

/* ---- building ---- */

static teeny_status build_log(teeny_ctx *ctx, cl_program prog, const char *options)
{
    size_t len = 0;
    char *log = NULL;
    teeny__error(ctx, TEENY_ERR_BUILD, "kernel build failed on %s (%s, driver %s)\nbuild options: %s\nbuild log:\n",
                 ctx->info.device_name, ctx->info.platform_name, ctx->info.driver_version, options);
    if (TEENY_CL(clGetProgramBuildInfo, prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) == CL_SUCCESS &&
        (log = teeny__malloc(len + 1)) != NULL &&
        TEENY_CL(clGetProgramBuildInfo, prog, ctx->device, CL_PROGRAM_BUILD_LOG, len, log, NULL) == CL_SUCCESS) {
        log[len] = '\0';
        teeny__error_append(ctx, log);
    } else {
        teeny__error_append(ctx, "(no build log available)");
    }
    teeny__free(log);
    return TEENY_ERR_BUILD;
}

static teeny_status build_from_source(teeny_ctx *ctx, const char *src, const char *options, cl_program *out)
{
    cl_int err;
    teeny_status st = TEENY_OK;
    size_t len = strlen(src);
    cl_program prog = TEENY_CLO(clCreateProgramWithSource, &err, ctx->context, 1, &src, &len);
    if (!prog)
        return teeny__cl_error(ctx, err, "clCreateProgramWithSource");
    err = TEENY_CL(clBuildProgram, prog, 1, &ctx->device, options, NULL, NULL);
    if (err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS) {
        st = build_log(ctx, prog, options);
        goto fail;
    }
    if (err != CL_SUCCESS) {
        st = teeny__cl_error(ctx, err, "clBuildProgram");
        goto fail;
    }
    *out = prog;
    return TEENY_OK;
fail:
    TEENY_CL_RELEASE(clReleaseProgram, prog);
    return st;
}

/* Build a cached binary; any failure is a cache miss, so nothing is
 * recorded in ctx (the rebuild from source decides the call's status). */
static cl_int build_from_binary(teeny_ctx *ctx, const unsigned char *bin, size_t len, const char *options,
                                cl_program *out)
{
    cl_int err, bin_status = CL_SUCCESS;
    cl_program prog = TEENY_CLO(clCreateProgramWithBinary, &err, ctx->context, 1, &ctx->device, &len, &bin,
                                &bin_status);
    if (!prog)
        return err != CL_SUCCESS ? err : CL_INVALID_BINARY;
    if (bin_status != CL_SUCCESS)
        err = bin_status;
    else
        err = TEENY_CL(clBuildProgram, prog, 1, &ctx->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        TEENY_CL_RELEASE(clReleaseProgram, prog);
        return err;
    }
    *out = prog;
    return CL_SUCCESS;
}

/* The program's kernel names (";"-separated; caller frees), or NULL. */
static char *kernel_names(cl_program prog)
{
    size_t len = 0;
    char *names;
    if (TEENY_CL(clGetProgramInfo, prog, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &len) != CL_SUCCESS || !len ||
        !(names = teeny__malloc(len + 1)))
        return NULL;
    if (TEENY_CL(clGetProgramInfo, prog, CL_PROGRAM_KERNEL_NAMES, len, names, NULL) != CL_SUCCESS) {
        teeny__free(names);
        return NULL;
    }
    names[len] = '\0';
    return names;
}

/* Store prog's binary under path; failures only cost a rebuild later. */
static void cache_program(const char *dir, const char *path, const char *key, cl_program prog)
{
    size_t size = 0;
    unsigned char *bin = NULL;
    char *names = kernel_names(prog);
    if (names && TEENY_CL(clGetProgramInfo, prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) == CL_SUCCESS &&
        size && (bin = teeny__malloc(size)) != NULL &&
        TEENY_CL(clGetProgramInfo, prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
        cache_store(dir, path, key, names, bin, size);
    teeny__free(bin);
    teeny__free(names);
}

/* A program from the disk cache entry at path for key, or NULL (a miss). */
static cl_program cache_fetch(teeny_ctx *ctx, const char *path, const char *key, const char *options)
{
    unsigned char *bin = NULL;
    char *names = NULL, *have = NULL;
    size_t len = 0;
    cl_program prog = NULL;
    cl_int err;
    if (!cache_load(path, key, &bin, &len, &names))
        return NULL;
    err = build_from_binary(ctx, bin, len, options, &prog);
    if (err != CL_SUCCESS) {
        teeny__log(TEENY_LOG_WARN, "kernel cache entry %s was rejected by the driver (%d); rebuilding it", path,
                   (int)err);
    } else if (!(have = kernel_names(prog)) || strcmp(have, names) != 0) {
        teeny__log(TEENY_LOG_WARN, "kernel cache entry %s holds another program's binary; rebuilding it", path);
        TEENY_CL_RELEASE(clReleaseProgram, prog);
        prog = NULL;
    }
    teeny__free(have);
    teeny__free(names);
    teeny__free(bin);
    return prog;
}

static teeny_status program_get(teeny_ctx *ctx, const char *family, const char *options, teeny__program **out)
{
    teeny__program *p;
    teeny_status st;
    char *src = NULL, *full_options = NULL;
    char dir[4096], path[4300], *key = NULL;
    cl_program prog = NULL;

    if (!options)
        options = "";
    for (p = ctx->programs; p; p = p->next)
        if (!strcmp(p->family, family) && !strcmp(p->options, options)) {
            *out = p;
            return TEENY_OK;
        }

    st = program_source(ctx, family, &src);
    if (st != TEENY_OK)
        return st;
    full_options = teeny__malloc(strlen(options) + 64);
    if (!full_options) {
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory building %s", family);
        goto cleanup;
    }
    snprintf(full_options, strlen(options) + 64, "-cl-std=CL1.2%s %s", ctx->known_compiler ? " -DTEENY_HINTS=1" : "",
             options);

    teeny__cache_dir(dir, sizeof dir);
    if (dir[0]) {
        /* the key in full; the file name is a hash of it */
        uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x84222325cbf29ce4ULL, k1, k2;
        size_t cap;
        h1 = hash_str(h1, src);
        h2 = hash_str(h2, src);
        cap = strlen(full_options) + strlen(ctx->info.device_name) + strlen(ctx->info.platform_name) +
              strlen(ctx->info.driver_version) + strlen(teeny_version_string()) + 160;
        if (!(key = teeny__malloc(cap))) {
            st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory building %s", family);
            goto cleanup;
        }
        snprintf(key, cap, "teenycl %s\nsource %016llx%016llx\noptions %s\ndevice %s\nplatform %s\ndriver %s\n",
                 teeny_version_string(), (unsigned long long)h1, (unsigned long long)h2, full_options,
                 ctx->info.device_name, ctx->info.platform_name, ctx->info.driver_version);
        k1 = hash_str(0xcbf29ce484222325ULL, key);
        k2 = hash_str(0x84222325cbf29ce4ULL, key);
        snprintf(path, sizeof path, "%s/%016llx%016llx.bin", dir, (unsigned long long)k1, (unsigned long long)k2);
        prog = cache_fetch(ctx, path, key, full_options);
    }
    if (!prog) {
        teeny__log(TEENY_LOG_DEBUG, "building %s for %s with %s", family, ctx->info.device_name, full_options);
        st = build_from_source(ctx, src, full_options, &prog);
        if (st != TEENY_OK)
            goto cleanup;
        if (key)
            cache_program(dir, path, key, prog);
    }

    p = teeny__calloc(1, sizeof *p);
    if (!p) {
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory caching program %s", family);
        goto cleanup;
    }
    teeny__strlcpy(p->family, family, sizeof p->family);
    p->options = teeny__malloc(strlen(options) + 1);
    if (!p->options) {
        teeny__free(p);
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory caching program %s", family);
        goto cleanup;
    }
    memcpy(p->options, options, strlen(options) + 1);
    p->program = prog;
    prog = NULL;
    p->next = ctx->programs;
    ctx->programs = p;
    *out = p;
cleanup:
    TEENY_CL_RELEASE(clReleaseProgram, prog);
    teeny__free(key);
    teeny__free(src);
    teeny__free(full_options);
    return st;
}

/* Test hook: report at most this many work-items per kernel (0: off). */
static size_t debug_wg_cap;

void teeny__debug_kernel_wg_cap(size_t cap)
{
    debug_wg_cap = cap;
}

/* What the compiler allows for this kernel. CL_KERNEL_LOCAL_MEM_SIZE counts
 * local-pointer arguments already set, so this runs right after creation,
 * before any argument is set: it is the kernel's static local memory. */
static teeny_status query_limits(teeny_ctx *ctx, cl_kernel k, const char *name, teeny__klimits *out)
{
    size_t wg = 0, mult = 0;
    cl_ulong local = 0;
    cl_int err = TEENY_CL(clGetKernelWorkGroupInfo, k, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    if (err == CL_SUCCESS)
        err = TEENY_CL(clGetKernelWorkGroupInfo, k, ctx->device, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                       sizeof mult, &mult, NULL);
    if (err == CL_SUCCESS)
        err = TEENY_CL(clGetKernelWorkGroupInfo, k, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    if (err != CL_SUCCESS)
        return teeny__error(ctx, TEENY_ERR_OPENCL, "clGetKernelWorkGroupInfo failed: %s (%d), kernel %s",
                            teeny__cl_error_name(err), (int)err, name);
    out->max_items = wg ? wg : 1;
    out->multiple = mult ? mult : 1;
    out->local_bytes = (uint64_t)local;
    return TEENY_OK;
}

static teeny_status create_kernel(teeny_ctx *ctx, teeny__program *p, const char *name, cl_kernel *out,
                                  teeny__klimits *lim)
{
    cl_int err;
    cl_kernel k = TEENY_CLO(clCreateKernel, &err, p->program, name);
    if (!k) {
        if (err == CL_INVALID_KERNEL_NAME)
            return teeny__error(ctx, TEENY_ERR_STATE, "kernel %s not found in program %s", name, p->family);
        return teeny__cl_error(ctx, err, "clCreateKernel");
    }
    teeny_status st = query_limits(ctx, k, name, lim);
    if (st != TEENY_OK) {
        TEENY_CL_RELEASE(clReleaseKernel, k);
        return st;
    }
    *out = k;
    return TEENY_OK;
}

static teeny_status recorder_add_kernel(teeny_ctx *ctx, teeny__recorder *rec, cl_kernel k,
                                        const teeny__klimits *lim);
static int recorder_limits(const teeny__recorder *rec, cl_kernel k, teeny__klimits *out);

/* The program's shared kernel object of that name, created on first use. */
static teeny_status cached_get(teeny_ctx *ctx, teeny__program *p, const char *kernel_name, cached_kernel **out)
{
    for (int i = 0; i < p->n_kernels; i++)
        if (!strcmp(p->kernels[i].name, kernel_name)) {
            *out = &p->kernels[i];
            return TEENY_OK;
        }
    TEENY_ASSERT(ctx, p->n_kernels < MAX_KERNELS_PER_PROGRAM);
    cached_kernel *c = &p->kernels[p->n_kernels];
    teeny_status st = create_kernel(ctx, p, kernel_name, &c->kernel, &c->limits);
    if (st != TEENY_OK)
        return st;
    teeny__strlcpy(c->name, kernel_name, sizeof c->name);
    p->n_kernels++;
    *out = c;
    return TEENY_OK;
}

/* A kernel for a launch: the shared one, or while recording a fresh one the
 * graph node owns. */
static teeny_status kernel_for_launch(teeny_ctx *ctx, teeny__program *p, const char *kernel_name, cl_kernel *out)
{
    if (ctx->rec) {
        teeny__klimits lim;
        teeny_status st = create_kernel(ctx, p, kernel_name, out, &lim);
        if (st == TEENY_OK && (st = recorder_add_kernel(ctx, ctx->rec, *out, &lim)) != TEENY_OK)
            TEENY_CL_RELEASE(clReleaseKernel, *out);
        return st;
    }
    cached_kernel *c;
    teeny_status st = cached_get(ctx, p, kernel_name, &c);
    if (st == TEENY_OK)
        *out = c->kernel;
    return st;
}

teeny_status teeny__kernel_get(teeny_ctx *ctx, const char *family, const char *options,
                               const char *kernel_name, cl_kernel *out)
{
    teeny__program *p;
    teeny_status st = program_get(ctx, family, options, &p);
    if (st != TEENY_OK)
        return st;
    return kernel_for_launch(ctx, p, kernel_name, out);
}

static void apply_cap(teeny__klimits *lim)
{
    if (debug_wg_cap && lim->max_items > debug_wg_cap)
        lim->max_items = debug_wg_cap;
    if (lim->multiple > lim->max_items)
        lim->multiple = lim->max_items;
}

teeny_status teeny__kernel_limits(teeny_ctx *ctx, cl_kernel k, const char *name, teeny__klimits *out)
{
    for (teeny__program *p = ctx->programs; p; p = p->next)
        for (int i = 0; i < p->n_kernels; i++)
            if (p->kernels[i].kernel == k) {
                *out = p->kernels[i].limits;
                apply_cap(out);
                return TEENY_OK;
            }
    if (ctx->rec && recorder_limits(ctx->rec, k, out)) {
        apply_cap(out);
        return TEENY_OK;
    }
    /* not ours: ask now (its local-pointer arguments, if set, count too) */
    teeny_status st = query_limits(ctx, k, name, out);
    if (st == TEENY_OK)
        apply_cap(out);
    return st;
}

teeny_status teeny__kernel_fit(teeny_ctx *ctx, const char *family, const char *options, const char *name,
                               size_t items, size_t dyn_local_bytes, cl_kernel *out)
{
    teeny__program *p;
    cached_kernel *c;
    teeny_status st = program_get(ctx, family, options, &p);
    if (st == TEENY_OK)
        st = cached_get(ctx, p, name, &c); /* the shared object: checking never records */
    if (st != TEENY_OK)
        return st;
    teeny__klimits lim = c->limits;
    apply_cap(&lim);
    uint64_t dev_local = ctx->info.local_mem_bytes;
    if (items > lim.max_items || lim.local_bytes + dyn_local_bytes > dev_local)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED,
                            "kernel %s built with \"%s\" needs %zu work-items and %llu bytes of local memory; "
                            "this device's compiler allows %zu items and %llu bytes (%s)",
                            name, options, items, (unsigned long long)(lim.local_bytes + dyn_local_bytes),
                            lim.max_items, (unsigned long long)dev_local, ctx->info.device_name);
    return out ? kernel_for_launch(ctx, p, name, out) : TEENY_OK;
}

teeny_status teeny__kernels_fit(teeny_ctx *ctx, const char *family, const char *options,
                                const teeny__kernel_need *need, int n)
{
    for (int i = 0; i < n; i++) {
        teeny_status st = teeny__kernel_fit(ctx, family, options, need[i].name, need[i].items, need[i].dyn_local,
                                            NULL);
        if (st != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}

teeny_status teeny__fit_halving(teeny_ctx *ctx, const char *family, const char *fmt, const char *const *names,
                                int n, int wg, int floor, int *wg_out, char *opt, size_t cap)
{
    teeny_status st;
    int first = wg;
    for (;; wg /= 2) {
        teeny__kernel_need need[16];
        TEENY_ASSERT(ctx, n <= 16);
        snprintf(opt, cap, fmt, wg);
        for (int i = 0; i < n; i++)
            need[i] = (teeny__kernel_need){names[i], (size_t)wg, 0};
        st = teeny__kernels_fit(ctx, family, opt, need, n);
        if (st != TEENY_ERR_UNSUPPORTED || wg / 2 < floor)
            break;
    }
    if (st == TEENY_OK && wg != first)
        teeny__clear_error(ctx);
    *wg_out = wg;
    return st;
}

size_t teeny__local_clamp(teeny_ctx *ctx, cl_kernel k, const char *name, size_t want)
{
    teeny__klimits lim;
    if (teeny__kernel_limits(ctx, k, name, &lim) != TEENY_OK) {
        teeny__clear_error(ctx); /* keep today's size; the launch reports any real problem */
        return want;
    }
    if (want <= lim.max_items)
        return want;
    size_t l = lim.max_items / lim.multiple * lim.multiple;
    return l ? l : 1;
}

teeny_status teeny__kernel_create(teeny_ctx *ctx, const char *family, const char *options,
                                  const char *kernel_name, cl_kernel *out)
{
    teeny__program *p;
    teeny__klimits lim;
    teeny_status st = program_get(ctx, family, options, &p);
    if (st != TEENY_OK)
        return st;
    return create_kernel(ctx, p, kernel_name, out, &lim);
}

void teeny__programs_release(teeny_ctx *ctx)
{
    teeny__program *p = ctx->programs, *next;
    for (; p; p = next) {
        next = p->next;
        for (int i = 0; i < p->n_kernels; i++)
            TEENY_CL_RELEASE(clReleaseKernel, p->kernels[i].kernel);
        TEENY_CL_RELEASE(clReleaseProgram, p->program);
        teeny__free(p->options);
        teeny__free(p);
    }
    ctx->programs = NULL;
}

/* ---- launches ---- */

teeny_status teeny__set_args(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, ...)
{
    teeny_status st = TEENY_OK;
    va_list ap;
    va_start(ap, kernel_name);
    for (cl_uint i = 0;; i++) {
        size_t size = va_arg(ap, size_t);
        const void *ptr;
        cl_int err;
        if (!size)
            break;
        ptr = va_arg(ap, const void *);
        err = TEENY_CL(clSetKernelArg, k, i, size, ptr);
        if (err != CL_SUCCESS) {
            st = teeny__error(ctx, TEENY_ERR_OPENCL, "clSetKernelArg failed: %s (%d), kernel %s argument %u",
                              teeny__cl_error_name(err), (int)err, kernel_name, (unsigned)i);
            break;
        }
    }
    va_end(ap);
    return st;
}

/* ---- recorder ---- */

typedef struct {
    cl_kernel kernel;      /* NULL for a fill */
    const char *name;
    cl_uint dims;
    size_t global[3], local[3];
    int has_local;
    cl_mem buf;            /* fill */
    size_t off, n;
    float value;
} recorded;

struct teeny__recorder {
    recorded *items;
    int n, cap;
    struct {
        cl_kernel kernel;
        teeny__klimits limits;
    } *kernels;
    int n_kernels, cap_kernels;
    cl_mem *scratch;
    int n_scratch, cap_scratch;
    size_t scratch_bytes;
};

/* Grow *arr (of elem-size items) to hold one more. */
static int grow(void **arr, int *cap, int n, size_t elem)
{
    if (n < *cap)
        return 1;
    int want = *cap ? *cap * 2 : 16;
    void *p = teeny__malloc((size_t)want * elem);
    if (!p)
        return 0;
    if (n)
        memcpy(p, *arr, (size_t)n * elem);
    teeny__free(*arr);
    *arr = p;
    *cap = want;
    return 1;
}

teeny_status teeny__recorder_create(teeny_ctx *ctx, teeny__recorder **out)
{
    *out = teeny__calloc(1, sizeof **out);
    if (!*out)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory creating a recorder");
    return TEENY_OK;
}

void teeny__recorder_free(teeny__recorder *rec)
{
    if (!rec)
        return;
    for (int i = 0; i < rec->n_kernels; i++)
        TEENY_CL_RELEASE(clReleaseKernel, rec->kernels[i].kernel);
    for (int i = 0; i < rec->n_scratch; i++)
        TEENY_CL_RELEASE(clReleaseMemObject, rec->scratch[i]);
    teeny__free(rec->items);
    teeny__free(rec->kernels);
    teeny__free(rec->scratch);
    teeny__free(rec);
}

void teeny__record_begin(teeny_ctx *ctx, teeny__recorder *rec)
{
    ctx->rec = rec;
}

void teeny__record_end(teeny_ctx *ctx)
{
    ctx->rec = NULL;
}

int teeny__recorder_count(const teeny__recorder *rec)
{
    return rec->n;
}

size_t teeny__recorder_scratch_bytes(const teeny__recorder *rec)
{
    return rec->scratch_bytes;
}

static teeny_status recorder_add_kernel(teeny_ctx *ctx, teeny__recorder *rec, cl_kernel k,
                                        const teeny__klimits *lim)
{
    if (!grow((void **)&rec->kernels, &rec->cap_kernels, rec->n_kernels, sizeof rec->kernels[0]))
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory recording a kernel");
    rec->kernels[rec->n_kernels].kernel = k;
    rec->kernels[rec->n_kernels++].limits = *lim;
    return TEENY_OK;
}

/* The limits a recorded kernel was created with; 0 when not one of rec's. */
static int recorder_limits(const teeny__recorder *rec, cl_kernel k, teeny__klimits *out)
{
    for (int i = rec->n_kernels - 1; i >= 0; i--)
        if (rec->kernels[i].kernel == k) {
            *out = rec->kernels[i].limits;
            return 1;
        }
    return 0;
}

static teeny_status recorder_add(teeny_ctx *ctx, const recorded *r)
{
    teeny__recorder *rec = ctx->rec;
    if (!grow((void **)&rec->items, &rec->cap, rec->n, sizeof(recorded)))
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory recording a launch");
    rec->items[rec->n++] = *r;
    return TEENY_OK;
}

teeny_status teeny__recorder_scratch(teeny_ctx *ctx, size_t bytes, cl_mem *out);
teeny_status teeny__recorder_scratch(teeny_ctx *ctx, size_t bytes, cl_mem *out)
{
    teeny__recorder *rec = ctx->rec;
    cl_int err;
    if (!grow((void **)&rec->scratch, &rec->cap_scratch, rec->n_scratch, sizeof(cl_mem)))
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory recording a workspace");
    cl_mem m = TEENY_CLO(clCreateBuffer, &err, ctx->context, CL_MEM_READ_WRITE, bytes, NULL);
    if (!m)
        return teeny__error(ctx, TEENY_ERR_OPENCL, "clCreateBuffer of %zu-byte workspace failed: %s (%d) on %s", bytes,
                            teeny__cl_error_name(err), (int)err, ctx->info.device_name);
    rec->scratch[rec->n_scratch++] = m;
    rec->scratch_bytes += bytes;
    *out = m;
    return teeny__buffer_born(ctx, m, bytes);
}

static teeny_status enqueue_fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value)
{
    teeny_status st = TEENY_OK;
    TEENY_CL_TRY(clEnqueueFillBuffer, ctx->queue, buf, &value, sizeof value, off * 4, n * 4, 0, NULL, NULL);
cleanup:
    return st;
}

/* The ctx->kernel_stores paths: ew_fill / ew_copy over n words (n and off
 * are within int32 range: tensors are checked at creation). Under a
 * recorder the kernel is the node's own and teeny__launch records it. */
static teeny_status fill_kernel(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value)
{
    static const char name[] = "ew_fill";
    int y_off = (int)off, count = (int)n;
    cl_uint bits;
    cl_kernel k;
    memcpy(&bits, &value, sizeof bits);
    teeny_status st = teeny__kernel_get(ctx, "elementwise", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &buf, sizeof(int), &y_off, sizeof(cl_uint), &bits,
                             sizeof(int), &count, (size_t)0);
    if (st == TEENY_OK) {
        size_t local = teeny__local_clamp(ctx, k, name, (size_t)ctx->work_group_size);
        st = teeny__launch(ctx, k, name, 1, &n, &local);
    }
    return st;
}

teeny_status teeny__copy_kernel(teeny_ctx *ctx, cl_mem src, cl_mem dst, size_t off, size_t n)
{
    static const char name[] = "ew_copy";
    int y_off = (int)off, count = (int)n;
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "elementwise", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &src, sizeof(cl_mem), &dst, sizeof(int), &y_off,
                             sizeof(int), &count, (size_t)0);
    if (st == TEENY_OK) {
        size_t local = teeny__local_clamp(ctx, k, name, (size_t)ctx->work_group_size);
        st = teeny__launch(ctx, k, name, 1, &n, &local);
    }
    return st;
}

/* oclgrind 21.10 keeps a released buffer's shadow for the next buffer that
 * gets its slot (the --uninitialized plugin has no deallocation hook), so a
 * new buffer would inherit a stale shadow: "initialized" where the old one
 * was written, and untracked past the old one's size, where kernel stores
 * are dropped and later loads reported. One whole-buffer host store gives
 * the shadow the right size; NaN (an out-of-range index as int32) keeps a
 * read of never-written memory visible in the results, as the tests'
 * poisoned outputs do. Blocking: only the simulator takes this path. */
teeny_status teeny__buffer_born(teeny_ctx *ctx, cl_mem buf, size_t bytes)
{
    teeny_status st = TEENY_OK;
    cl_uint *nan_words;
    if (!ctx->kernel_stores)
        return TEENY_OK;
    nan_words = teeny__malloc(bytes);
    if (!nan_words)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory initializing a %zu-byte buffer", bytes);
    for (size_t i = 0; i < bytes / 4; i++)
        nan_words[i] = 0x7fc00000u;
    TEENY_CL_TRY(clEnqueueWriteBuffer, ctx->queue, buf, CL_TRUE, 0, bytes, nan_words, 0, NULL, NULL);
cleanup:
    teeny__free(nan_words);
    return st;
}

teeny_status teeny__fill(teeny_ctx *ctx, cl_mem buf, size_t off, size_t n, float value)
{
    if (!n)
        return TEENY_OK;
    if (ctx->kernel_stores)
        return fill_kernel(ctx, buf, off, n, value);
    if (ctx->rec) {
        recorded r = {0};
        r.name = "fill";
        r.buf = buf;
        r.off = off;
        r.n = n;
        r.value = value;
        return recorder_add(ctx, &r);
    }
    return enqueue_fill(ctx, buf, off, n, value);
}

static teeny_status enqueue_kernel(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, cl_uint dims,
                                   const size_t *g, const size_t *local)
{
    cl_int err;
    cl_event ev = NULL, *evp = NULL;
    if (ctx->profiling && ctx->prof_count < ctx->prof_cap)
        evp = &ev;
    err = TEENY_CL(clEnqueueNDRangeKernel, ctx->queue, k, dims, NULL, g, local, 0, NULL, evp);
    if (err == CL_SUCCESS && ev) {
        ctx->prof_names[ctx->prof_count] = kernel_name;
        ctx->prof_events[ctx->prof_count++] = ev;
    }
    if (err != CL_SUCCESS)
        return teeny__error(ctx, TEENY_ERR_OPENCL, "clEnqueueNDRangeKernel failed: %s (%d), kernel %s on %s",
                            teeny__cl_error_name(err), (int)err, kernel_name, ctx->info.device_name);
    return TEENY_OK;
}

teeny_status teeny__recorder_replay(teeny_ctx *ctx, const teeny__recorder *rec, int from, int to)
{
    for (int i = from; i < to; i++) {
        const recorded *r = &rec->items[i];
        teeny_status st = r->kernel ? enqueue_kernel(ctx, r->kernel, r->name, r->dims, r->global,
                                                     r->has_local ? r->local : NULL)
                                    : enqueue_fill(ctx, r->buf, r->off, r->n, r->value);
        if (st != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}

teeny_status teeny__launch(teeny_ctx *ctx, cl_kernel k, const char *kernel_name, int dims,
                           const size_t *global, const size_t *local)
{
    size_t g[3];
    for (int i = 0; i < dims; i++) {
        size_t l = local ? local[i] : 1;
        g[i] = (global[i] + l - 1) / l * l;
        if (g[i] == 0)
            return TEENY_OK; /* nothing to do */
    }
    if (ctx->rec) {
        recorded r = {0};
        r.kernel = k;
        r.name = kernel_name;
        r.dims = (cl_uint)dims;
        for (int i = 0; i < dims; i++) {
            r.global[i] = g[i];
            r.local[i] = local ? local[i] : 1;
        }
        r.has_local = local != NULL;
        return recorder_add(ctx, &r);
    }
    return enqueue_kernel(ctx, k, kernel_name, (cl_uint)dims, g, local);
}

/* ---- profiling ---- */

/* TEENY_PROFILE=1: log each kernel's share of the profiled span. */
static void profile_summary(teeny_ctx *ctx)
{
    enum { MAX = 64 };
    const char *names[MAX];
    double ms[MAX];
    int calls[MAX], n = 0;
    for (int i = 0; i < ctx->prof_count; i++) {
        cl_ulong s = 0, e = 0;
        int k;
        if (TEENY_CL(clGetEventProfilingInfo, ctx->prof_events[i], CL_PROFILING_COMMAND_START, sizeof s, &s, NULL) ||
            TEENY_CL(clGetEventProfilingInfo, ctx->prof_events[i], CL_PROFILING_COMMAND_END, sizeof e, &e, NULL))
            return;
        for (k = 0; k < n && strcmp(names[k], ctx->prof_names[i]); k++)
            ;
        if (k == n) {
            if (n == MAX)
                continue;
            names[n] = ctx->prof_names[i];
            ms[n] = 0;
            calls[n++] = 0;
        }
        ms[k] += (double)(e - s) * 1e-6;
        calls[k]++;
    }
    for (int k = 0; k < n; k++)
        teeny__log(TEENY_LOG_WARN, "profile: %-28s %5d launches %10.4f ms", names[k], calls[k], ms[k]);
}

static void profile_clear(teeny_ctx *ctx)
{
    for (int i = 0; i < ctx->prof_count; i++)
        TEENY_CL_RELEASE(clReleaseEvent, ctx->prof_events[i]);
    ctx->prof_count = 0;
}

teeny_status teeny_profile_begin(teeny_ctx *ctx)
{
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_profile_begin: ctx is NULL or destroyed");
    teeny__clear_error(ctx);
    if (!ctx->prof_events) {
        ctx->prof_events = teeny__calloc(4096, sizeof(cl_event));
        ctx->prof_names = teeny__calloc(4096, sizeof(const char *));
        if (!ctx->prof_events || !ctx->prof_names) {
            teeny__free(ctx->prof_events);
            teeny__free(ctx->prof_names);
            ctx->prof_events = NULL;
            ctx->prof_names = NULL;
            return teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_profile_begin: out of host memory");
        }
        ctx->prof_cap = 4096;
    }
    profile_clear(ctx);
    ctx->profiling = 1;
    return TEENY_OK;
}

teeny_status teeny_profile_end(teeny_ctx *ctx, double *device_ms, int *kernels)
{
    teeny_status st = TEENY_OK;
    cl_ulong first = 0, last = 0;
    cl_command_queue_properties props = 0;
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_profile_end: ctx is NULL or destroyed");
    teeny__clear_error(ctx);
    if (!ctx->profiling)
        return teeny__error(ctx, TEENY_ERR_STATE, "teeny_profile_end without teeny_profile_begin");
    ctx->profiling = 0;
    TEENY_CL_TRY(clGetCommandQueueInfo, ctx->queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (!(props & CL_QUEUE_PROFILING_ENABLE)) {
        st = teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "the context's queue was created without profiling");
        goto cleanup;
    }
    if (ctx->prof_count)
        TEENY_CL_TRY(clWaitForEvents, (cl_uint)ctx->prof_count, ctx->prof_events);
    for (int i = 0; i < ctx->prof_count; i++) {
        cl_ulong s, e;
        TEENY_CL_TRY(clGetEventProfilingInfo, ctx->prof_events[i], CL_PROFILING_COMMAND_START, sizeof s, &s, NULL);
        TEENY_CL_TRY(clGetEventProfilingInfo, ctx->prof_events[i], CL_PROFILING_COMMAND_END, sizeof e, &e, NULL);
        if (i == 0 || s < first)
            first = s;
        if (e > last)
            last = e;
    }
    if (device_ms)
        *device_ms = (double)(last - first) * 1e-6;
    if (kernels)
        *kernels = ctx->prof_count;
    if (getenv("TEENY_PROFILE"))
        profile_summary(ctx);
cleanup:
    profile_clear(ctx);
    return st;
}
