/*
 * teeny-info -- list OpenCL platforms and devices with the capabilities
 * teenycl uses, mark the default device, and run a quick self-test (build
 * and run one kernel, check its result) on a chosen device.
 *
 * Usage: teeny-info [--device SPEC] [--no-self-test]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "teenycl.h"

static int self_test(const char *spec)
{
    enum { N = 1000 };
    static float a[N], b[N], y[N];
    teeny_ctx *ctx = NULL;
    teeny_tensor *ta = NULL, *tb = NULL, *ty = NULL;
    int64_t shape[1] = {N};
    int bad = 0;
    teeny_status st = teeny_ctx_create(spec, &ctx);
    if (st != TEENY_OK) {
        fprintf(stderr, "self-test: %s: %s\n", teeny_status_name(st), teeny_last_error(NULL));
        return 1;
    }
    for (int i = 0; i < N; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = (float)(N - i);
    }
    if ((st = teeny_tensor_create(ctx, 1, shape, &ta)) == TEENY_OK &&
        (st = teeny_tensor_create(ctx, 1, shape, &tb)) == TEENY_OK &&
        (st = teeny_tensor_create(ctx, 1, shape, &ty)) == TEENY_OK &&
        (st = teeny_tensor_write(ta, a, N)) == TEENY_OK && (st = teeny_tensor_write(tb, b, N)) == TEENY_OK &&
        (st = teeny_tensor_fill(ty, NAN)) == TEENY_OK && (st = teeny_add(ctx, ta, tb, ty)) == TEENY_OK &&
        (st = teeny_tensor_read(ty, y, N)) == TEENY_OK) {
        for (int i = 0; i < N; i++)
            bad += y[i] != a[i] + b[i];
    }
    if (st != TEENY_OK)
        fprintf(stderr, "self-test on %s: %s: %s\n", teeny_ctx_device_name(ctx), teeny_status_name(st),
                teeny_last_error(ctx));
    else
        printf("self-test on %s: built and ran ew_add on %d elements: %s\n", teeny_ctx_device_name(ctx), N,
               bad ? "WRONG RESULTS" : "ok");
    teeny_tensor_destroy(ta);
    teeny_tensor_destroy(tb);
    teeny_tensor_destroy(ty);
    teeny_ctx_destroy(ctx);
    return st != TEENY_OK || bad;
}

int main(int argc, char **argv)
{
    const char *spec = NULL;
    int run_self_test = 1, count = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            spec = argv[++i];
        else if (!strcmp(argv[i], "--no-self-test"))
            run_self_test = 0;
        else {
            fprintf(stderr, "usage: %s [--device SPEC] [--no-self-test]\n", argv[0]);
            return 2;
        }
    }
    printf("teenycl %s\n", teeny_version_string());
    teeny_status st = teeny_devices_list(NULL, 0, &count);
    if (st != TEENY_OK) {
        fprintf(stderr, "%s: %s\n", teeny_status_name(st), teeny_last_error(NULL));
        return 1;
    }
    teeny_device_info *devs = calloc((size_t)count + 1, sizeof *devs);
    if (!devs)
        return 1;
    teeny_devices_list(devs, count, &count);
    if (count == 0)
        printf("no OpenCL devices found (install an ICD, e.g. pocl-opencl-icd)\n");
    for (int i = 0; i < count; i++) {
        const teeny_device_info *d = &devs[i];
        printf("%s %d:%d  %s\n", d->is_default ? "*" : " ", d->platform_index, d->device_index, d->device_name);
        printf("      platform %s; vendor %s; %s\n", d->platform_name, d->vendor,
               d->is_gpu ? "GPU" : d->is_cpu ? "CPU" : "other");
        printf("      %s; %s; driver %s\n", d->device_version, d->opencl_c_version, d->driver_version);
        printf("      %u compute units; max work-group %zu; local mem %llu KiB; global mem %llu MiB; "
               "max alloc %llu MiB\n",
               d->compute_units, d->max_work_group_size, (unsigned long long)(d->local_mem_bytes >> 10),
               (unsigned long long)(d->global_mem_bytes >> 20), (unsigned long long)(d->max_alloc_bytes >> 20));
        printf("      fp64 %s; subgroups %s; NVIDIA inline PTX %s\n", d->has_fp64 ? "yes" : "no",
               d->has_subgroups ? "yes" : "no", d->has_nvidia_ptx ? "yes" : "no");
    }
    printf("(* marks the default device; TEENY_DEVICE or --device SPEC chooses another)\n");
    free(devs);
    return run_self_test && count ? self_test(spec) : 0;
}
