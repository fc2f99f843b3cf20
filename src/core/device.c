/*
 * device.c -- platform/device discovery, device selection by spec string,
 * capability queries and the context's lifetime. The bottom of the
 * library: it calls only status.c, simulator.c (the workaround flag) and,
 * once per context, tune.c (the device profile, which calls nothing above
 * status.c).
 * What the layers above hang on the context (build.c's programs,
 * profile.c's events) they register a release hook for
 * (teeny__ctx_on_release), so freeing a context never calls up into them.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define MAX_PLATFORMS 16
#define MAX_DEVICES 64

typedef struct {
    cl_platform_id platform;
    cl_device_id device;
    teeny_device_info info;
} found_device;

/* A string property, truncated to cap (the driver rejects a short buffer,
 * so read the full length first). */
static cl_int str_info(cl_device_id d, cl_device_info what, char *out, size_t cap)
{
    char buf[1024];
    size_t len = 0;
    cl_int err = TEENY_CL(clGetDeviceInfo, d, what, sizeof buf, buf, &len);
    out[0] = '\0';
    if (err == CL_SUCCESS) {
        buf[sizeof buf - 1] = '\0';
        teeny__strlcpy(out, buf, cap);
    }
    return err;
}

teeny_status teeny__device_query(teeny_ctx *ctx, cl_platform_id p, cl_device_id d, teeny_device_info *info)
{
    teeny_status st = TEENY_OK;
    cl_device_type type;
    cl_uint cu;
    size_t wg;
    cl_ulong local, global, alloc;
    size_t ext_len = 0;
    char *ext = NULL;

    char pname[1024];
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    TEENY_CL_TRY(clGetPlatformInfo, p, CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    pname[sizeof pname - 1] = '\0';
    teeny__strlcpy(info->platform_name, pname, sizeof info->platform_name);
    TEENY_CL_CHECK(str_info(d, CL_DEVICE_NAME, info->device_name, sizeof info->device_name), "clGetDeviceInfo(CL_DEVICE_NAME)");
    TEENY_CL_CHECK(str_info(d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor), "clGetDeviceInfo(CL_DEVICE_VENDOR)");
    TEENY_CL_CHECK(str_info(d, CL_DEVICE_VERSION, info->device_version, sizeof info->device_version), "clGetDeviceInfo(CL_DEVICE_VERSION)");
    TEENY_CL_CHECK(str_info(d, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version), "clGetDeviceInfo(CL_DRIVER_VERSION)");
    TEENY_CL_CHECK(str_info(d, CL_DEVICE_OPENCL_C_VERSION, info->opencl_c_version, sizeof info->opencl_c_version), "clGetDeviceInfo(CL_DEVICE_OPENCL_C_VERSION)");
    TEENY_CL_TRY(clGetDeviceInfo, d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    TEENY_CL_TRY(clGetDeviceInfo, d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    TEENY_CL_TRY(clGetDeviceInfo, d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    TEENY_CL_TRY(clGetDeviceInfo, d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    TEENY_CL_TRY(clGetDeviceInfo, d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL);
    TEENY_CL_TRY(clGetDeviceInfo, d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL);
    TEENY_CL_TRY(clGetDeviceInfo, d, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_len);
    ext = teeny__malloc(ext_len + 1);
    if (!ext) {
        st = teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory reading device extensions");
        goto cleanup;
    }
    TEENY_CL_TRY(clGetDeviceInfo, d, CL_DEVICE_EXTENSIONS, ext_len, ext, NULL);
    ext[ext_len] = '\0';

    info->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
    info->is_cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
    info->compute_units = cu;
    info->max_work_group_size = wg;
    info->local_mem_bytes = local;
    info->global_mem_bytes = global;
    info->max_alloc_bytes = alloc;
    info->has_fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    info->has_subgroups = strstr(ext, "cl_khr_subgroups") != NULL || strstr(ext, "cl_intel_subgroups") != NULL;
    /* NVIDIA's OpenCL compiler accepts inline PTX (asm volatile). */
    info->has_nvidia_ptx = info->is_gpu && teeny__contains_nocase(info->vendor, "nvidia") &&
                           strstr(ext, "cl_nv_") != NULL;
cleanup:
    teeny__free(ext);
    return st;
}

/* All devices of all platforms, in platform then device order. */
static teeny_status enumerate(found_device *out, int max, int *count)
{
    const teeny_ctx *ctx = NULL; /* errors go to the thread's buffer */
    teeny_status st = TEENY_OK;
    cl_platform_id platforms[MAX_PLATFORMS];
    cl_uint n_platforms = 0;
    int n = 0;

    cl_int err = TEENY_CL(clGetPlatformIDs, MAX_PLATFORMS, platforms, &n_platforms);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && n_platforms == 0)) {
        *count = 0;
        return TEENY_OK;
    }
    if (err != CL_SUCCESS)
        return teeny__cl_error(NULL, err, "clGetPlatformIDs");
    if (n_platforms > MAX_PLATFORMS)
        n_platforms = MAX_PLATFORMS;
    for (cl_uint p = 0; p < n_platforms; p++) {
        cl_device_id devices[MAX_DEVICES];
        cl_uint n_devices = 0;
        err = TEENY_CL(clGetDeviceIDs, platforms[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devices, &n_devices);
        if (err == CL_DEVICE_NOT_FOUND)
            continue;
        if (err != CL_SUCCESS)
            return teeny__cl_error(NULL, err, "clGetDeviceIDs");
        if (n_devices > MAX_DEVICES)
            n_devices = MAX_DEVICES;
        for (cl_uint d = 0; d < n_devices && n < max; d++) {
            out[n].platform = platforms[p];
            out[n].device = devices[d];
            st = teeny__device_query(NULL, platforms[p], devices[d], &out[n].info);
            if (st != TEENY_OK)
                return st;
            out[n].info.platform_index = (int)p;
            out[n].info.device_index = (int)d;
            n++;
        }
    }
    *count = n;
    (void)ctx;
    return TEENY_OK;
}

static int default_index(const found_device *devs, int n)
{
    for (int i = 0; i < n; i++)
        if (devs[i].info.is_gpu)
            return i;
    for (int i = 0; i < n; i++)
        if (devs[i].info.is_cpu)
            return i;
    return n > 0 ? 0 : -1;
}

/* A "P:D" spec: 1 with both indices when the text before the first ':'
 * holds only digits, signs and blanks (so "gfx90a:xnack-" stays a name)
 * and both sides are decimal indices (teeny__parse_int), -1 with *why and
 * *which when such a spec is malformed, 0 for any other spec. */
static int index_spec(const char *spec, long long idx[2], const char **why, const char **which)
{
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : 0;
    if (!n || strspn(spec, "0123456789+- \t") < n)
        return 0;
    *which = "platform";
    if (!teeny__parse_int(spec, n, 0, INT_MAX, &idx[0], why))
        return -1;
    *which = "device";
    return teeny__parse_int(colon + 1, strlen(colon + 1), 0, INT_MAX, &idx[1], why) ? 1 : -1;
}

/* Specs that name an implementation or a vendor: a device matches when its
 * platform name, its vendor or its device name contains one of the
 * needles (any case). The platform names are those each implementation
 * reports: PoCL "Portable Computing Language", Mesa "rusticl" and
 * "Clover", Apple "Apple", ARM's Mali driver "ARM Platform" (devices
 * "Mali-G78 ..."), Qualcomm "QUALCOMM Snapdragon(TM)" (devices "QUALCOMM
 * Adreno(TM)"), Intel "Intel(R) OpenCL ...", AMD "AMD Accelerated Parallel
 * Processing"; Mesa's drivers also run Mali GPUs ("Mali-G52 (Panfrost)"). */
static const struct {
    const char *spec, *platform[3], *vendor[2], *device[1];
} NAMED_SPECS[] = {
    {"pocl", {"portable computing", "pocl"}, {NULL}, {NULL}},
    {"nvidia", {"nvidia"}, {"nvidia"}, {NULL}},
    {"amd", {"amd"}, {"amd", "advanced micro devices"}, {NULL}},
    {"intel", {"intel"}, {"intel"}, {NULL}},
    {"rusticl", {"rusticl"}, {NULL}, {NULL}},
    {"clover", {"clover"}, {NULL}, {NULL}},
    {"mesa", {"rusticl", "clover"}, {"mesa"}, {NULL}},
    {"apple", {"apple"}, {"apple"}, {NULL}},
    {"arm", {"arm platform"}, {NULL}, {"mali"}},
    {"mali", {"arm platform"}, {NULL}, {"mali"}},
    {"qualcomm", {"qualcomm"}, {"qualcomm"}, {"adreno"}},
    {"adreno", {"qualcomm"}, {"qualcomm"}, {"adreno"}},
};

static int any_in(const char *hay, const char *const *needles, int n)
{
    for (int i = 0; i < n && needles[i]; i++)
        if (teeny__contains_nocase(hay, needles[i]))
            return 1;
    return 0;
}

int teeny__device_matches(const teeny_device_info *info, const char *spec)
{
    long long idx[2];
    const char *why, *which;
    if (!strcasecmp(spec, "cpu")) return info->is_cpu;
    if (!strcasecmp(spec, "gpu")) return info->is_gpu;
    for (size_t i = 0; i < sizeof NAMED_SPECS / sizeof NAMED_SPECS[0]; i++)
        if (!strcasecmp(spec, NAMED_SPECS[i].spec))
            return any_in(info->platform_name, NAMED_SPECS[i].platform, 3) ||
                   any_in(info->vendor, NAMED_SPECS[i].vendor, 2) || any_in(info->device_name, NAMED_SPECS[i].device, 1);
    switch (index_spec(spec, idx, &why, &which)) {
    case 1: return info->platform_index == idx[0] && info->device_index == idx[1];
    case -1: return 0; /* rejected before matching: spec_check */
    default: return teeny__contains_nocase(info->device_name, spec);
    }
}

/* Before any device is matched: an empty TEENY_DEVICE and a malformed
 * "P:D" are TEENY_ERR_ARG (a number that wrapped, "4294967296:0", used to
 * pick platform 0). from names where the spec came from. */
static teeny_status spec_check(const char *spec, const char *from)
{
    long long idx[2];
    const char *why = "", *which = "";
    if (!*spec)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s is set but empty; unset it or give a device spec", from);
    if (index_spec(spec, idx, &why, &which) < 0)
        return teeny__error(NULL, TEENY_ERR_ARG,
                            "%s \"%.64s\": the %s index %s; a P:D spec takes two decimal indices as teeny-info "
                            "lists them, e.g. 0:1",
                            from, spec, which, why);
    return TEENY_OK;
}

static void list_devices(char *buf, size_t cap, const found_device *devs, int n)
{
    size_t len = strlen(buf);
    for (int i = 0; i < n && len + 1 < cap; i++) {
        snprintf(buf + len, cap - len, "\n  %d:%d  %s (%s, %s)", devs[i].info.platform_index,
                 devs[i].info.device_index, devs[i].info.device_name, devs[i].info.platform_name,
                 devs[i].info.is_gpu ? "GPU" : devs[i].info.is_cpu ? "CPU" : "other");
        len = strlen(buf);
    }
    if (n == 0 && len + 1 < cap)
        snprintf(buf + len, cap - len, " (no OpenCL devices found: is an ICD such as pocl-opencl-icd installed?)");
}

/* The caller's struct_size: an application built against an older or a
 * newer header (same major version) has its own struct layout, whose
 * first field says how large it is. Garbage (an unset field) is refused. */
static teeny_status info_size(const teeny_device_info *out, const char *fn, size_t *size)
{
    *size = out->struct_size;
    if (*size < TEENY_DEVICE_INFO_MIN_SIZE || *size > 65536)
        return teeny__error(NULL, TEENY_ERR_ARG,
                            "%s: struct_size %zu is not a teeny_device_info size (set it with "
                            "TEENY_DEVICE_INFO_INIT; at least %zu)",
                            fn, *size, (size_t)TEENY_DEVICE_INFO_MIN_SIZE);
    return TEENY_OK;
}

/* Write the fields of info that fit in size bytes at dst; bytes past the
 * fields this library knows are zeroed. */
static void info_store(const teeny_device_info *info, void *dst, size_t size)
{
    teeny_device_info copy = *info;
    copy.struct_size = size;
    if (size > sizeof copy) {
        memcpy(dst, &copy, sizeof copy);
        memset((char *)dst + sizeof copy, 0, size - sizeof copy);
    } else {
        memcpy(dst, &copy, size);
    }
}

teeny_status teeny_devices_list(teeny_device_info *out, int max, int *count)
{
    found_device devs[MAX_DEVICES];
    int n = 0;
    size_t size = sizeof *out;
    if (!count || max < 0 || (max > 0 && !out))
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_devices_list: count is NULL, or out is NULL with max > 0");
    if (max > 0 && info_size(out, "teeny_devices_list", &size) != TEENY_OK)
        return TEENY_ERR_ARG;
    teeny_status st = enumerate(devs, MAX_DEVICES, &n);
    if (st != TEENY_OK)
        return st;
    int def = default_index(devs, n);
    for (int i = 0; i < n && i < max; i++) {
        devs[i].info.is_default = i == def;
        info_store(&devs[i].info, (char *)out + (size_t)i * size, size);
    }
    *count = n;
    return TEENY_OK;
}

/* What the rows of src/tune/profiles.def are matched on. A failed query
 * fails the context's creation: falling back would pick another row, or
 * mad() for fma(), and so other bits than the same device gives next
 * time. */
static teeny_status probe_caps(teeny_ctx *ctx)
{
    teeny__device_caps *c = &ctx->caps;
    cl_uint vendor = 0, vec = 1;
    cl_device_fp_config fp = 0;
    size_t param_bytes = 0;
    cl_int err;
    if ((err = TEENY_CL(clGetDeviceInfo, ctx->device, CL_DEVICE_VENDOR_ID, sizeof vendor, &vendor, NULL)) ||
        (err = TEENY_CL(clGetDeviceInfo, ctx->device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof vec, &vec,
                        NULL)) ||
        (err = TEENY_CL(clGetDeviceInfo, ctx->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL)) ||
        (err = TEENY_CL(clGetDeviceInfo, ctx->device, CL_DEVICE_MAX_PARAMETER_SIZE, sizeof param_bytes, &param_bytes,
                        NULL)))
        return teeny__cl_error(NULL, err, "clGetDeviceInfo");
    if (vec < 1)
        vec = 1;
    c->vendor_id = vendor;
    /* the GPU and CPU bits (the rows ask no other), from the query
     * teeny__device_query already made */
    c->type = (ctx->info.is_gpu ? CL_DEVICE_TYPE_GPU : 0) | (ctx->info.is_cpu ? CL_DEVICE_TYPE_CPU : 0);
    c->compute_units = ctx->info.compute_units;
    c->local_mem = ctx->info.local_mem_bytes;
    c->work_group = ctx->info.max_work_group_size;
    c->param_bytes = param_bytes;
    c->float_vector = (int)vec;
    c->cap_fma = (fp & CL_FP_FMA) != 0;
    c->cap_subgroups = ctx->info.has_subgroups;
    c->cap_nvidia_ptx = ctx->info.has_nvidia_ptx;
    return TEENY_OK;
}

/* The per-device defaults: the capabilities, the device profile with the
 * environment's overrides (src/tune/tune.c; a malformed TEENY_TUNING or
 * TEENY_ATTN_* fails the creation here), the simulator flag, and whether
 * the compiler takes hints. */
static teeny_status derive_defaults(teeny_ctx *ctx)
{
    teeny__sim_detect(ctx); /* ctx->kernel_stores: simulator.c */
    teeny_status st = probe_caps(ctx);
    if (st == TEENY_OK)
        st = teeny__tune_init(ctx);
    if (st != TEENY_OK)
        return st;
    /* Compilers known to take #pragma unroll and always_inline (clang-based
     * ones and NVIDIA's) get them through TEENY_HINTS (cl/common.cl); any
     * other builds the plain OpenCL C 1.2 source, as does every compiler
     * under TEENY_TUNING=generic. */
    static const char *const hinted[] = {"nvidia", "portable computing", "pocl", "rusticl", "clover",
                                         "advanced micro devices", "amd", "intel", "apple"};
    int known = 0;
    /* oclgrind (21.10) is left out on purpose: it checks the plain source,
     * and with the hints its -cl-opt-disable build of conv2d.cl lost
     * kernels and its plugins crashed */
    for (size_t i = 0; i < sizeof hinted / sizeof hinted[0]; i++)
        known |= teeny__contains_nocase(ctx->info.platform_name, hinted[i]) || teeny__contains_nocase(ctx->info.vendor, hinted[i]);
    ctx->known_compiler = known && !ctx->tune.generic;
    /* PoCL keeps each kernel's machine code in a cache of its own (POCL_CACHE_DIR, else ~/.cache/pocl) and,
     * asked for a program's binary, first compiles every kernel of the program for any work-group size: on a
     * cold cache that was three quarters of the conv2d suite's compile time, for kernels it never ran, and a
     * warm start gains nothing from a second copy. There build.c keeps none, unless POCL_KERNEL_CACHE=0
     * turned PoCL's own cache off. */
    const char *pocl_cache = getenv("POCL_KERNEL_CACHE");
    ctx->impl_caches_kernels = (teeny__contains_nocase(ctx->info.platform_name, "portable computing") ||
                                teeny__contains_nocase(ctx->info.platform_name, "pocl")) &&
                               !(pocl_cache && !strcmp(pocl_cache, "0"));
    return TEENY_OK;
}

static teeny_status ctx_alloc(teeny_ctx **out)
{
    teeny_ctx *ctx = teeny__calloc(1, sizeof *ctx);
    if (!ctx)
        return teeny__error(NULL, TEENY_ERR_NOMEM, "out of host memory allocating a context");
    ctx->refs = 1;
    ctx->handle_alive = 1;
    teeny__test_hooks_off(ctx);
    *out = ctx;
    return TEENY_OK;
}

teeny_status teeny__ctx_on_release(teeny_ctx *ctx, teeny__release_fn fn)
{
    for (int i = 0; i < ctx->n_release_hooks; i++)
        if (ctx->release_hooks[i] == fn)
            return TEENY_OK;
    TEENY_ASSERT(ctx, ctx->n_release_hooks < TEENY__RELEASE_HOOKS);
    ctx->release_hooks[ctx->n_release_hooks++] = fn;
    return TEENY_OK;
}

static void ctx_free(teeny_ctx *ctx)
{
    while (ctx->n_release_hooks > 0)
        ctx->release_hooks[--ctx->n_release_hooks](ctx);
    for (int i = 0; i < TEENY__WS_SLOTS; i++)
        TEENY_CL_RELEASE(clReleaseMemObject, ctx->ws.slot[i].buf);
    TEENY_CL_RELEASE(clReleaseCommandQueue, ctx->queue);
    TEENY_CL_RELEASE(clReleaseContext, ctx->context);
    teeny__free(ctx);
}

teeny_status teeny_ctx_create(const char *device_spec, teeny_ctx **out)
{
    found_device devs[MAX_DEVICES];
    int n = 0, pick = -1;
    teeny_ctx *ctx = NULL;
    teeny_status st;
    cl_int err;
    const char *from = "device spec";

    if (!out)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_ctx_create: out is NULL");
    *out = NULL;
    if (!device_spec || !*device_spec) {
        device_spec = getenv("TEENY_DEVICE");
        from = "TEENY_DEVICE";
    }
    if ((st = teeny__env_check()) != TEENY_OK || (device_spec && (st = spec_check(device_spec, from)) != TEENY_OK))
        return st;
    st = enumerate(devs, MAX_DEVICES, &n);
    if (st != TEENY_OK)
        return st;
    if (device_spec && *device_spec) {
        for (int i = 0; i < n && pick < 0; i++)
            if (teeny__device_matches(&devs[i].info, device_spec))
                pick = i;
    } else {
        pick = default_index(devs, n);
    }
    if (pick < 0) {
        if (device_spec)
            teeny__error(NULL, TEENY_ERR_NO_DEVICE, "no OpenCL device matches %s \"%s\"; devices:", from, device_spec);
        else
            teeny__error(NULL, TEENY_ERR_NO_DEVICE, "no OpenCL device found; devices:");
        char *buf = (char *)teeny_last_error(NULL);
        list_devices(buf, 4096, devs, n);
        return TEENY_ERR_NO_DEVICE;
    }

    st = ctx_alloc(&ctx);
    if (st != TEENY_OK)
        return st;
    ctx->platform = devs[pick].platform;
    ctx->device = devs[pick].device;
    ctx->info = devs[pick].info;
    ctx->info.is_default = pick == default_index(devs, n);
    if ((st = derive_defaults(ctx)) != TEENY_OK)
        goto fail;

    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
    ctx->context = TEENY_CLO(clCreateContext, &err, props, 1, &ctx->device, NULL, NULL);
    if (!ctx->context) {
        st = teeny__cl_error(NULL, err, "clCreateContext");
        goto fail;
    }
    ctx->queue = TEENY_CLO(clCreateCommandQueue, &err, ctx->context, ctx->device, CL_QUEUE_PROFILING_ENABLE);
    if (!ctx->queue) {
        st = teeny__cl_error(NULL, err, "clCreateCommandQueue");
        goto fail;
    }
    teeny__log(TEENY_LOG_INFO, "context on %s (%s), device profile \"%s\"", ctx->info.device_name,
               ctx->info.platform_name, ctx->tune.profile->name);
    *out = ctx;
    return TEENY_OK;
fail:
    ctx_free(ctx);
    return st;
}

teeny_status teeny_ctx_create_from_cl(cl_context c, cl_device_id d, cl_command_queue q, teeny_ctx **out)
{
    teeny_ctx *ctx = NULL;
    teeny_status st;
    cl_int err;
    cl_platform_id platform;
    cl_command_queue_properties qprops = 0;

    if (!out)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_ctx_create_from_cl: out is NULL");
    *out = NULL;
    if (!c || !d || !q)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_ctx_create_from_cl: %s is NULL",
                            !c ? "context" : !d ? "device" : "queue");
    if ((st = teeny__env_check()) != TEENY_OK)
        return st;
    err = TEENY_CL(clGetCommandQueueInfo, q, CL_QUEUE_PROPERTIES, sizeof qprops, &qprops, NULL);
    if (err != CL_SUCCESS)
        return teeny__cl_error(NULL, err, "clGetCommandQueueInfo");
    if (qprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_ctx_create_from_cl: the queue must be in order");
    err = TEENY_CL(clGetDeviceInfo, d, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL);
    if (err != CL_SUCCESS)
        return teeny__cl_error(NULL, err, "clGetDeviceInfo");

    st = ctx_alloc(&ctx);
    if (st != TEENY_OK)
        return st;
    st = teeny__device_query(NULL, platform, d, &ctx->info);
    if (st != TEENY_OK)
        goto fail;
    ctx->platform = platform;
    ctx->device = d;
    if ((st = derive_defaults(ctx)) != TEENY_OK)
        goto fail;
    err = TEENY_CL(clRetainContext, c);
    if (err != CL_SUCCESS) {
        st = teeny__cl_error(NULL, err, "clRetainContext");
        goto fail;
    }
    ctx->context = c;
    err = TEENY_CL(clRetainCommandQueue, q);
    if (err != CL_SUCCESS) {
        st = teeny__cl_error(NULL, err, "clRetainCommandQueue");
        goto fail;
    }
    ctx->queue = q;
    *out = ctx;
    return TEENY_OK;
fail:
    ctx_free(ctx);
    return st;
}

/* Drop one reference; the last one frees everything. */
void teeny__ctx_unref(teeny_ctx *ctx);
void teeny__ctx_unref(teeny_ctx *ctx)
{
    if (--ctx->refs == 0)
        ctx_free(ctx);
}

void teeny_ctx_destroy(teeny_ctx *ctx)
{
    if (!ctx || !ctx->handle_alive)
        return;
    ctx->handle_alive = 0;
    teeny__ctx_unref(ctx);
}

int teeny__ctx_check(const teeny_ctx *ctx)
{
    return ctx && ctx->handle_alive;
}

teeny_status teeny_ctx_finish(teeny_ctx *ctx)
{
    teeny_status st = TEENY_OK;
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_ctx_finish: ctx is NULL or destroyed");
    teeny__clear_error(ctx);
    TEENY_CL_TRY(clFinish, ctx->queue);
cleanup:
    return st;
}

teeny_status teeny_ctx_set_tf32(teeny_ctx *ctx, int enable)
{
    if (!teeny__ctx_check(ctx))
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_ctx_set_tf32: ctx is NULL or destroyed");
    ctx->tf32 = enable != 0;
    return TEENY_OK;
}

cl_command_queue teeny_ctx_cl_queue(const teeny_ctx *ctx)
{
    return ctx ? ctx->queue : NULL;
}

const char *teeny_ctx_device_name(const teeny_ctx *ctx)
{
    return ctx ? ctx->info.device_name : "";
}

teeny_status teeny_ctx_device_info(const teeny_ctx *ctx, teeny_device_info *out)
{
    if (!ctx || !out)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_ctx_device_info: %s is NULL", !ctx ? "ctx" : "out");
    size_t size;
    if (info_size(out, "teeny_ctx_device_info", &size) != TEENY_OK)
        return TEENY_ERR_ARG;
    info_store(&ctx->info, out, size);
    return TEENY_OK;
}
