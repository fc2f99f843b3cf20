/*
 * teeny-info -- list OpenCL platforms and devices with the capabilities
 * teenycl uses, mark the default device, and run a quick self-test (build
 * and run one kernel, check its result) on a chosen device.
 *
 * With --check it qualifies a device instead: every kernel family
 * (cl/<family>.cl) is built cold and runs one small case against a host
 * reference written here (tools cannot link tests/ref), each family in its
 * own child process with a time limit, so that a driver whose compiler
 * aborts or hangs on one family still gets the others checked and the
 * report names the family and the phase (building or running). The table
 * gives per family the cold build time (the op calls, which compile the
 * family's programs, with the queue held back so that nothing runs yet),
 * the first run's time (which on PoCL and Mesa includes the code generation
 * those drivers defer to the first launch), the largest error against the
 * reference, and pass/FAIL; the failures follow, one line each.
 *
 * Usage: teeny-info [--device SPEC] [--no-self-test]
 *        teeny-info --check [SPEC] [--timeout SECONDS] [--only FAMILY,...]
 *        teeny-info --onnx MODEL.onnx [--device SPEC]   (the declared inputs and
 *            outputs, then each node: supported, or why not)
 *        teeny-info --list-ops   (the ONNX ops the importer takes, and their opsets)
 * --help and --version, and the command-line errors, as every teenycl
 * program has them (tools/cli.h). A malformed --timeout (not a whole
 * decimal number in 1..86400, tools/args.h) or a name in --only that is
 * not a family exits with status 2, the usage errors' status, before
 * anything runs.
 *
 * Test hooks of --check (for tests/test_tools.sh; they make a healthy
 * driver look broken): TEENY_CHECK_CRASH=FAMILY raises SIGABRT in that
 * family's child when it starts building; TEENY_CHECK_HANG=FAMILY makes it
 * sleep there until the timeout kills it.
 *
 * Files: this one holds the device list, the self-test, --onnx and the
 * command line; --check's runner is info_check.c, its cases info_cases.c
 * (info_check.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "info_check.h"
#include "onnx_info.h"
#include "teenycl.h"
#include "teenycl_onnx.h"

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


/* ---- --onnx: which nodes of a model the importer takes, and why not ---- */

static void onnx_node_line(const teeny_onnx_node_report *r, void *user_data)
{
    int *counts = user_data;
    counts[r->status == TEENY_OK]++;
    printf("%5d  %-24s %-32.32s %s%s%s\n", r->index, r->op_type, r->name[0] ? r->name : "-",
           r->status == TEENY_OK ? "supported" : "UNSUPPORTED", r->status == TEENY_OK ? "" : ": ", r->message);
}

static int onnx_report(const char *path, const char *spec)
{
    teeny_ctx *ctx = NULL;
    int counts[2] = {0, 0};
    teeny_status st = teeny_ctx_create(spec, &ctx);
    if (st != TEENY_OK) {
        fprintf(stderr, "%s: %s\n", teeny_status_name(st), teeny_last_error(NULL));
        return 1;
    }
    onnx_io_rows rows;
    if ((st = onnx_io_read(ctx, path, &rows)) != TEENY_OK) {
        fprintf(stderr, "teeny-info: %s: %s\n", teeny_status_name(st), teeny_last_error(ctx));
        free(rows.rows);
        teeny_ctx_destroy(ctx);
        return 1;
    }
    onnx_io_print(&rows, "", stdout);
    free(rows.rows);
    printf("\n%5s  %-24s %-32s %s\n", "node", "op", "name", "import");
    st = teeny_onnx_inspect(ctx, path, NULL, onnx_node_line, counts);
    if (st != TEENY_OK && counts[0] + counts[1] == 0)
        fprintf(stderr, "%s: %s\n", teeny_status_name(st), teeny_last_error(ctx));
    else
        printf("%d of %d nodes supported\n", counts[1], counts[0] + counts[1]);
    teeny_ctx_destroy(ctx);
    return st == TEENY_OK ? 0 : 1;
}

/* --list-ops: the importer's registry (src/onnx/ops.def), one op a line with its opsets. */
static int list_onnx_ops(void)
{
    int n = teeny_onnx_op_count();
    printf("%-28s %s\n", "ONNX op", "opsets");
    for (int i = 0; i < n; i++) {
        const char *op;
        int since, until;
        if (teeny_onnx_op_info(i, &op, &since, &until) != TEENY_OK) {
            fprintf(stderr, "teeny-info: %s\n", teeny_last_error(NULL));
            return 1;
        }
        printf("%-28s %d..%d\n", op, since, until);
    }
    printf("%d ops (domain \"\" or \"ai.onnx\")\n", n);
    return 0;
}

enum { O_DEVICE, O_NO_SELF_TEST, O_CHECK, O_TIMEOUT, O_ONLY, O_ONNX, O_LIST_OPS, O_COUNT };

static const cli_opt OPTS[] = {
    [O_DEVICE] = {"--device", "SPEC", "the device to self-test (and for --onnx): cpu, gpu, pocl, nvidia, P:D,\n"
                                      "a part of its name (default: TEENY_DEVICE, else the first GPU, else CPU)"},
    [O_NO_SELF_TEST] = {"--no-self-test", NULL, "list the devices only"},
    [O_CHECK] = {"--check", NULL, "build every kernel family cold on the device (SPEC when one follows)\n"
                                  "and check one case of each against a host reference, each in a child\n"
                                  "process; exit status 1 if any fails"},
    [O_TIMEOUT] = {"--timeout", "SECONDS", "--check: seconds per family, 1..86400 (default 120)"},
    [O_ONLY] = {"--only", "FAMILY,...", "--check: only these families, of: common elementwise batchnorm conv2d\n"
                                        "attention psa pool linear loss concat optim"},
    [O_ONNX] = {"--onnx", "MODEL.onnx", "list the model's declared inputs and outputs (symbolic dimensions by\n"
                                        "name), then each node: supported by the importer, or why not;\n"
                                        "exit status 1 if any is not"},
    [O_LIST_OPS] = {"--list-ops", NULL, "list the ONNX ops the importer takes, with the opsets of each"},
    [O_COUNT] = {NULL, NULL, NULL},
};

static const cli_spec SPEC = {
    "teeny-info",
    "[--device SPEC] [--no-self-test]\n"
    "--check [SPEC] [--timeout SECONDS] [--only FAMILY,...]\n"
    "--onnx MODEL.onnx [--device SPEC]\n"
    "--list-ops",
    "List the OpenCL platforms and devices with the capabilities teenycl uses, mark the\n"
    "default device and self-test it (build and run one kernel); or qualify a device\n"
    "(--check); or say what of an ONNX model the importer takes (--onnx).",
    OPTS,
    "Test hooks of --check: TEENY_CHECK_CRASH=FAMILY (SIGABRT while building),\n"
    "TEENY_CHECK_HANG=FAMILY (hangs while building).\n"
    "Exit status: 0 ok; 1 a failure (self-test, a family, a node); 2 a bad command line.",
};

int main(int argc, char **argv)
{
    const char *spec = NULL, *only = NULL, *onnx = NULL;
    int run_self_test = 1, count = 0, check = 0, timeout_s = 120;
    for (int i = 1; i < argc; i++) {
        const char *v;
        char what[300];
        switch (cli_next(&SPEC, argc, argv, &i, &v)) {
        case CLI_EXIT_OK:
            return 0;
        case CLI_EXIT_USAGE:
            return 2;
        case O_DEVICE:
            spec = v;
            break;
        case O_NO_SELF_TEST:
            run_self_test = 0;
            break;
        case O_CHECK:
            check = 1;
            if (i + 1 < argc && argv[i + 1][0] != '-')
                spec = argv[++i];
            break;
        case O_TIMEOUT:
            if (!args_int("teeny-info", "--timeout", v, 1, 86400, &timeout_s))
                return 2;
            break;
        case O_ONLY:
            only = v;
            if (!info_families_known("--only", only))
                return 2;
            break;
        case O_ONNX:
            onnx = v;
            break;
        case O_LIST_OPS:
            return list_onnx_ops();
        default:
            snprintf(what, sizeof what, "unexpected argument \"%.200s\"", v);
            return cli_fail(&SPEC, what);
        }
    }
    if (check) {
        static const char *const hooks[] = {"TEENY_CHECK_CRASH", "TEENY_CHECK_HANG"};
        for (int h = 0; h < 2; h++)
            if (getenv(hooks[h]) && !info_families_known(hooks[h], getenv(hooks[h])))
                return 2;
        return info_check_device(spec, timeout_s, only);
    }
    if (onnx)
        return onnx_report(onnx, spec);
    printf("teenycl %s\n", teeny_version_string());
    teeny_status st = teeny_devices_list(NULL, 0, &count);
    if (st != TEENY_OK) {
        fprintf(stderr, "%s: %s\n", teeny_status_name(st), teeny_last_error(NULL));
        return 1;
    }
    teeny_device_info *devs = calloc((size_t)count + 1, sizeof *devs);
    if (!devs)
        return 1;
    devs[0].struct_size = sizeof *devs; /* the stride of the array */
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
