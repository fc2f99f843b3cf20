/*
 * build.c -- the kernel-build layer: embedded OpenCL C sources (or
 * TEENY_KERNEL_DIR), per-device builds with -D specialization options, the
 * per-context in-memory program/kernel cache, and each built kernel's
 * limits (work-group size, preferred multiple, static local memory) that
 * ops check a configuration against before launching it.
 *
 * Dependencies run down only: build.c calls cache.c (disk entries as
 * bytes), record.c (a recorder owns the kernels created while a graph
 * records) and device.c (to register its release hook); it never calls the
 * launch layer. The context owns the program list through that hook:
 * device.c frees it at destruction without knowing this file.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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

/* The program families built from several cl/ files: common.cl, then
 * these parts in order, each after a newline (a cut at a blank line keeps
 * the bytes the compiler sees); a family not listed is <family>.cl alone. */
#define MAX_PARTS 8 /* common.cl and up to seven */
static const struct {
    const char *family;
    const char *parts[MAX_PARTS - 1];
} program_parts[] = {
    {"attention", {"attention", "attention_fwd", "attention_bwd", "attention_tf32", "attention_cpu"}},
    {"batchnorm", {"batchnorm", "batchnorm_bwd", "batchnorm_cpu"}},
    {"conv2d", {"conv2d", "conv2d_gemm", "conv2d_gemm_cpu", "conv2d_dw", "conv2d_dwb", "conv2d_dw_cpu", "conv2d_reduce"}},
};

/* The family's program: its parts joined, each from TEENY_KERNEL_DIR when
 * set (<part>.cl there), else embedded. */
static teeny_status program_source(teeny_ctx *ctx, const char *family, char **out)
{
    const char *dir = getenv("TEENY_KERNEL_DIR");
    const char *parts[MAX_PARTS] = {"common", family};
    char *text[MAX_PARTS] = {NULL};
    size_t lens[MAX_PARTS] = {0}, total = 0;
    int n = 2;
    teeny_status st = TEENY_OK;

    for (size_t f = 0; f < sizeof program_parts / sizeof program_parts[0]; f++)
        if (!strcmp(program_parts[f].family, family))
            for (n = 1; n < MAX_PARTS && program_parts[f].parts[n - 1]; n++)
                parts[n] = program_parts[f].parts[n - 1];
    for (int i = 0; i < n; i++) {
        if (dir && *dir) {
            char path[4096], why[256];
            snprintf(path, sizeof path, "%s/%s.cl", dir, parts[i]);
            /* a regular file only: a FIFO there must not block the build */
            st = teeny__read_file(path, (unsigned char **)&text[i], &lens[i], why, sizeof why);
            if (st != TEENY_OK) {
                st = teeny__error(ctx, st, "cannot read kernel source %s (TEENY_KERNEL_DIR): %s", path, why);
                goto cleanup;
            }
        } else {
            const char *src = teeny__kernel_source(parts[i], &lens[i]);
            if (!src) {
                st = teeny__error(ctx, TEENY_ERR_STATE, "no embedded kernel source %s.cl (family \"%s\")", parts[i],
                                  family);
                goto cleanup;
            }
            text[i] = teeny__malloc(lens[i] + 1);
            if (!text[i]) {
                st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory copying kernel source");
                goto cleanup;
            }
            memcpy(text[i], src, lens[i] + 1);
        }
        total += lens[i] + 1;
    }
    if (!(*out = teeny__malloc(total))) {
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory joining kernel sources");
        goto cleanup;
    }
    total = 0;
    for (int i = 0; i < n; i++) {
        memcpy(*out + total, text[i], lens[i]);
        total += lens[i];
        (*out)[total++] = i + 1 < n ? '\n' : '\0';
    }
cleanup:
    for (int i = 0; i < n; i++)
        teeny__free(text[i]);
    return st;
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

/* A successful build whose log mentions a warning: counted (the tests
 * require none on every implementation) and logged at debug level only,
 * so the user's terminal stays quiet. */
static teeny_status note_warnings(teeny_ctx *ctx, cl_program prog, const char *options)
{
    size_t len = 0;
    char *log = NULL;
    cl_int err = TEENY_CL(clGetProgramBuildInfo, prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &len);
    if (err != CL_SUCCESS)
        return teeny__cl_error(ctx, err, "clGetProgramBuildInfo(CL_PROGRAM_BUILD_LOG)");
    if (len <= 1)
        return TEENY_OK;
    if (!(log = teeny__malloc(len + 1)))
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory reading a build log");
    err = TEENY_CL(clGetProgramBuildInfo, prog, ctx->device, CL_PROGRAM_BUILD_LOG, len, log, NULL);
    if (err == CL_SUCCESS) {
        log[len] = '\0';
        int warned = 0;
        for (char *line = log, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next)
                *next++ = '\0';
            for (char *p = line; *p; p++)
                *p = (char)tolower((unsigned char)*p);
            /* NVIDIA's compiler notes on every kernel of a cold build that
             * a kernel overrides noinline, and PoCL on a CPU without
             * AVX-512 that its own builtins' float16 arguments "change the
             * abi" (spelled in its _builtin_renames.h): their chatter, not
             * our source */
            if (strstr(line, "warning") && !strstr(line, "overriding noinline attribute") &&
                !strstr(line, "changes the abi"))
                warned = 1;
            if (next)
                next[-1] = '\n';
        }
        if (warned) {
            ctx->prog.build_warnings++;
            teeny__log(TEENY_LOG_DEBUG, "kernel build with %s on %s warned:\n%s", options, ctx->info.device_name, log);
        }
    }
    teeny__free(log);
    return err == CL_SUCCESS ? TEENY_OK : teeny__cl_error(ctx, err, "clGetProgramBuildInfo(CL_PROGRAM_BUILD_LOG)");
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
    if ((st = note_warnings(ctx, prog, options)) != TEENY_OK)
        goto fail;
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
        teeny__cache_store(dir, path, key, names, bin, size);
    teeny__free(bin);
    teeny__free(names);
}

/* A program from the disk cache entry at path for key, or NULL (a miss):
 * its kernels must be those stored with it and declared in src. */
static cl_program cache_fetch(teeny_ctx *ctx, const char *path, const char *key, const char *src, const char *options)
{
    unsigned char *bin = NULL;
    char *names = NULL, *have = NULL;
    size_t len = 0;
    cl_program prog = NULL;
    cl_int err;
    if (!teeny__cache_load(path, key, &bin, &len, &names))
        return NULL;
    err = build_from_binary(ctx, bin, len, options, &prog);
    if (err != CL_SUCCESS) {
        teeny__log(TEENY_LOG_WARN, "kernel cache entry %s was rejected by the driver (%d); rebuilding it", path,
                   (int)err);
    } else if (!(have = kernel_names(prog)) || !teeny__cache_names_ok(have, names, src)) {
        teeny__log(TEENY_LOG_WARN, "kernel cache entry %s holds another program's binary; rebuilding it", path);
        TEENY_CL_RELEASE(clReleaseProgram, prog);
        prog = NULL;
    }
    teeny__free(have);
    teeny__free(names);
    teeny__free(bin);
    return prog;
}

/* The context's release hook (device.c runs it at destruction). */
static void programs_release(teeny_ctx *ctx)
{
    teeny__program *p = ctx->prog.programs, *next;
    for (; p; p = next) {
        next = p->next;
        for (int i = 0; i < p->n_kernels; i++)
            TEENY_CL_RELEASE(clReleaseKernel, p->kernels[i].kernel);
        TEENY_CL_RELEASE(clReleaseProgram, p->program);
        teeny__free(p->options);
        teeny__free(p);
    }
    ctx->prog.programs = NULL;
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
    for (p = ctx->prog.programs; p; p = p->next)
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
    snprintf(full_options, strlen(options) + 64, "-cl-std=CL1.2%s%s %s", ctx->known_compiler ? " -DTEENY_HINTS=1" : "",
             ctx->caps.cap_fma ? " -DTEENY_FMA=1" : "", options);

    dir[0] = '\0';
    if (!ctx->impl_caches_kernels)
        teeny__cache_dir(dir, sizeof dir);
    if (dir[0]) {
        if (!teeny__cache_key(ctx, dir, src, full_options, &key, path, sizeof path)) {
            st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory building %s", family);
            goto cleanup;
        }
        prog = cache_fetch(ctx, path, key, src, full_options);
    }
    if (!prog) {
        teeny__log(TEENY_LOG_DEBUG, "building %s for %s with %s", family, ctx->info.device_name, full_options);
        st = build_from_source(ctx, src, full_options, &prog);
        if (st != TEENY_OK)
            goto cleanup;
        if (key)
            cache_program(dir, path, key, prog);
    }

    if ((st = teeny__ctx_on_release(ctx, programs_release)) != TEENY_OK)
        goto cleanup;
    p = teeny__calloc(1, sizeof *p);
    if (!p) {
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory caching program %s", family);
        goto cleanup;
    }
    teeny__strlcpy(p->family, family, sizeof p->family);
    p->options = teeny__strdup(options);
    if (!p->options) {
        teeny__free(p);
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory caching program %s", family);
        goto cleanup;
    }
    p->program = prog;
    prog = NULL;
    p->next = ctx->prog.programs;
    ctx->prog.programs = p;
    *out = p;
cleanup:
    TEENY_CL_RELEASE(clReleaseProgram, prog);
    teeny__free(key);
    teeny__free(src);
    teeny__free(full_options);
    return st;
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
    if (ctx->prog.rec) {
        teeny__klimits lim;
        teeny_status st = create_kernel(ctx, p, kernel_name, out, &lim);
        if (st == TEENY_OK && (st = teeny__recorder_add_kernel(ctx, ctx->prog.rec, *out, &lim)) != TEENY_OK)
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

/* The test hook KERNEL_WG_CAP (core/test_hooks.def): at most that many
 * work-items, so that every fallback can be forced anywhere. */
static void apply_cap(const teeny_ctx *ctx, teeny__klimits *lim)
{
    size_t cap = (size_t)ctx->hooks.kernel_wg_cap;
    if (cap && lim->max_items > cap)
        lim->max_items = cap;
    if (lim->multiple > lim->max_items)
        lim->multiple = lim->max_items;
}

teeny_status teeny__kernel_limits(teeny_ctx *ctx, cl_kernel k, const char *name, teeny__klimits *out)
{
    for (teeny__program *p = ctx->prog.programs; p; p = p->next)
        for (int i = 0; i < p->n_kernels; i++)
            if (p->kernels[i].kernel == k) {
                *out = p->kernels[i].limits;
                apply_cap(ctx, out);
                return TEENY_OK;
            }
    if (ctx->prog.rec && teeny__recorder_limits(ctx->prog.rec, k, out)) {
        apply_cap(ctx, out);
        return TEENY_OK;
    }
    /* not ours: ask now (its local-pointer arguments, if set, count too) */
    teeny_status st = query_limits(ctx, k, name, out);
    if (st == TEENY_OK)
        apply_cap(ctx, out);
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
    apply_cap(ctx, &lim);
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

