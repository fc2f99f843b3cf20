/*
 * embed_app -- teenycl inside an application that owns its OpenCL objects.
 *
 * The application makes its own cl_context and in-order command queue with
 * plain OpenCL calls, runs a kernel of its own (scale-and-shift of an input
 * image), then hands the same queue and its own buffers to teenycl for a
 * conv + folded batch-norm + SiLU inference and an attention over the
 * result, and reads the answer back with a single blocking read at the end.
 * Everything runs in queue order: no clFinish between the application's
 * kernel and teenycl's calls. The result is checked against a float64 host
 * computation of the same chain. main() runs the steps in that order:
 * app_setup and app_run (plain OpenCL), teenycl_run, read_result, compare.
 *
 * Layouts: image x [B, C, H, W] NCHW; conv weight [K, C, 3, 3], padding 1;
 * batch-norm parameters [K]; the attention runs over the K channels of each
 * image as tokens of dimension H*W (q = k = v = y viewed as [B, K, H*W]).
 *
 * Usage: embed_app [--device P:D | --device NAME]
 *   P:D picks platform P, device D (indices as clGetPlatformIDs and
 *   clGetDeviceIDs list them); NAME the first device whose name contains
 *   it. Default: the first GPU, else the first device of any type.
 *
 * Ownership: the application creates and releases its cl_context,
 * cl_command_queue and cl_mem buffers. teeny_ctx_create_from_cl and
 * teeny_tensor_wrap_cl retain what they are given and release it when the
 * teenycl object is destroyed; they never destroy it. So either side may
 * let go first: the OpenCL objects live until the last reference is gone.
 *
 * The queue: teenycl enqueues on the queue it was given, nothing else
 * (no hidden queue), and its calls return without waiting, except the
 * ones its header marks "host sync". The queue must be in-order: that is
 * what orders the application's kernel before teenycl's first read of x,
 * and teenycl's last write of o before the application's read.
 *
 * Threads: the teeny_ctx and its tensors are used by one thread at a time
 * (teenycl sets arguments on kernel objects it caches per context). Other
 * threads may use other contexts. If another thread enqueues on the same
 * queue, its commands interleave with teenycl's in whatever order the
 * threads make the calls, so keep a shared queue to one thread.
 *
 * Failures: a teenycl call that rejects its input has enqueued nothing and
 * changed nothing; one that fails during execution leaves its outputs
 * unspecified. Either way the context and tensors stay usable and must
 * still be destroyed, and teeny_last_error(ctx) says what went wrong.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h" /* --help, --version, the command-line errors: as every teenycl program */
#include "teenycl.h"

enum { B = 2, C = 3, H = 8, W = 8, K = 4, KS = 3, HW = H * W };

static const char *APP_KERNEL =
    "__kernel void scale_shift(__global const float *x, __global float *y, float a, float b, int n)\n"
    "{\n"
    "    int i = get_global_id(0);\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] + b;\n"
    "}\n";

/* The steps below return 1 when done, or 0 after saying what failed. */
#define CL_CHECK(call)                                                                    \
    do {                                                                                  \
        cl_int err_ = (call);                                                             \
        if (err_ != CL_SUCCESS) {                                                         \
            fprintf(stderr, "embed_app: %s failed: OpenCL error %d\n", #call, (int)err_); \
            return 0;                                                                     \
        }                                                                                 \
    } while (0)

#define TEENY_CHECK(call)                                                                              \
    do {                                                                                               \
        teeny_status st_ = (call);                                                                     \
        if (st_ != TEENY_OK) {                                                                         \
            fprintf(stderr, "embed_app: %s failed: %s: %s\n", #call, teeny_status_name(st_),           \
                    teeny_last_error(tctx));                                                           \
            return 0;                                                                                  \
        }                                                                                              \
    } while (0)

/* The application: its host data, its own OpenCL objects, and the teenycl
 * objects it makes over them (NULL until made). */
typedef struct {
    float image[B * C * HW], weight[K * C * KS * KS];
    float bn_w[K], bn_b[K], bn_mean[K], bn_var[K], out[B * K * HW];
    char dev_name[256];
    cl_device_id dev;
    cl_context clctx;
    cl_command_queue queue;
    cl_program prog;
    cl_kernel kern;
    cl_mem buf_image, buf_x, buf_w, buf_bn[4], buf_scale, buf_shift, buf_y, buf_o;
    teeny_ctx *tctx;
    teeny_tensor *x, *w, *bn[4], *sc, *sh, *y, *tokens, *o;
} app;

/* x = IMG_SCALE * image + IMG_SHIFT (the application's kernel); the
 * batch norm's epsilon; the attention's scale, 1/sqrt(H*W). */
static const float IMG_SCALE = 1.0f / 128, IMG_SHIFT = -1.0f, BN_EPS = 1e-5f, ATT_SCALE = 1.0f / 8;

static int contains_nocase(const char *hay, const char *needle)
{
    for (; *hay; hay++) {
        size_t i = 0;
        while (needle[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (!needle[i])
            return 1;
    }
    return !*needle;
}

/* The device spec names, else the first GPU, else the first device. */
static int pick_device(const char *spec, cl_device_id *out)
{
    cl_platform_id platforms[16];
    cl_uint n_platforms = 0;
    cl_device_id first_any = NULL;
    int want_p = -1, want_d = -1;
    if (clGetPlatformIDs(16, platforms, &n_platforms) != CL_SUCCESS || n_platforms == 0)
        return 0;
    if (spec && sscanf(spec, "%d:%d", &want_p, &want_d) != 2)
        want_p = want_d = -1;
    for (cl_uint p = 0; p < n_platforms && p < 16; p++) {
        cl_device_id devices[16];
        cl_uint n_devices = 0;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, devices, &n_devices) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < n_devices && d < 16; d++) {
            char name[256] = "";
            cl_device_type type = 0;
            clGetDeviceInfo(devices[d], CL_DEVICE_NAME, sizeof name - 1, name, NULL);
            clGetDeviceInfo(devices[d], CL_DEVICE_TYPE, sizeof type, &type, NULL);
            if (spec) {
                if ((want_p >= 0 && (int)p == want_p && (int)d == want_d) ||
                    (want_p < 0 && contains_nocase(name, spec))) {
                    *out = devices[d];
                    return 1;
                }
            } else if (type & CL_DEVICE_TYPE_GPU) {
                *out = devices[d];
                return 1;
            } else if (!first_any) {
                first_any = devices[d];
            }
        }
    }
    *out = first_any;
    return first_any != NULL;
}

static const cli_opt OPTS[] = {
    {"--device", "P:D|NAME", "platform P's device D (as clGetPlatformIDs and clGetDeviceIDs list them),\n"
                             "or the first device whose name contains NAME (default: the first GPU,\n"
                             "else the first device)"},
    {NULL, NULL, NULL},
};

static const cli_spec SPEC = {
    "embed_app",
    "[--device P:D | --device NAME]",
    "teenycl inside an application that owns its OpenCL context, queue and buffers: its own\n"
    "kernel, then teenycl's conv + batch norm + SiLU and attention on the same queue, checked\n"
    "against a float64 host computation.",
    OPTS,
    "Exit status: 0 the result matches; 1 it does not, or a failure; 2 a bad command line.",
};

static double silu(double v)
{
    return v / (1.0 + exp(-v));
}

/* Inputs: an 8-bit-like image and small weights, deterministic. */
static void make_inputs(app *ap)
{
    unsigned seed = 7;
    for (int i = 0; i < B * C * HW; i++) {
        seed = seed * 1103515245u + 12345u;
        ap->image[i] = (float)((seed >> 16) % 256);
    }
    for (int i = 0; i < K * C * KS * KS; i++) {
        seed = seed * 1103515245u + 12345u;
        ap->weight[i] = ((float)((seed >> 16) % 2001) - 1000.0f) / 4000.0f;
    }
    for (int k = 0; k < K; k++) {
        ap->bn_w[k] = 0.5f + 0.25f * (float)k;
        ap->bn_b[k] = 0.1f * (float)k - 0.15f;
        ap->bn_mean[k] = 0.05f * (float)(k - 2);
        ap->bn_var[k] = 0.5f + 0.3f * (float)k;
    }
}

/* ---- the application's own OpenCL setup ---- */

/* A context, an in-order queue, the application's kernel and its buffers,
 * with plain OpenCL calls. */
static int app_setup(app *ap)
{
    cl_int err;
    clGetDeviceInfo(ap->dev, CL_DEVICE_NAME, sizeof ap->dev_name - 1, ap->dev_name, NULL);
    ap->clctx = clCreateContext(NULL, 1, &ap->dev, NULL, NULL, &err);
    CL_CHECK(err);
    ap->queue = clCreateCommandQueue(ap->clctx, ap->dev, 0, &err); /* in-order: properties 0 */
    CL_CHECK(err);
    ap->prog = clCreateProgramWithSource(ap->clctx, 1, &APP_KERNEL, NULL, &err);
    CL_CHECK(err);
    CL_CHECK(clBuildProgram(ap->prog, 1, &ap->dev, "", NULL, NULL));
    ap->kern = clCreateKernel(ap->prog, "scale_shift", &err);
    CL_CHECK(err);

    size_t sz_x = sizeof ap->image, sz_w = sizeof ap->weight, sz_k = K * sizeof(float), sz_y = sizeof ap->out;
    ap->buf_image = clCreateBuffer(ap->clctx, CL_MEM_READ_ONLY, sz_x, NULL, &err);
    CL_CHECK(err);
    ap->buf_x = clCreateBuffer(ap->clctx, CL_MEM_READ_WRITE, sz_x, NULL, &err);
    CL_CHECK(err);
    ap->buf_w = clCreateBuffer(ap->clctx, CL_MEM_READ_ONLY, sz_w, NULL, &err);
    CL_CHECK(err);
    for (int i = 0; i < 4; i++) {
        ap->buf_bn[i] = clCreateBuffer(ap->clctx, CL_MEM_READ_ONLY, sz_k, NULL, &err);
        CL_CHECK(err);
    }
    ap->buf_scale = clCreateBuffer(ap->clctx, CL_MEM_READ_WRITE, sz_k, NULL, &err);
    CL_CHECK(err);
    ap->buf_shift = clCreateBuffer(ap->clctx, CL_MEM_READ_WRITE, sz_k, NULL, &err);
    CL_CHECK(err);
    ap->buf_y = clCreateBuffer(ap->clctx, CL_MEM_READ_WRITE, sz_y, NULL, &err);
    CL_CHECK(err);
    ap->buf_o = clCreateBuffer(ap->clctx, CL_MEM_READ_WRITE, sz_y, NULL, &err);
    CL_CHECK(err);
    return 1;
}

/* Uploads without waiting (the host arrays are static, so they outlive
 * the copies, and the in-order queue runs them before the kernels), then
 * the application's own kernel: x = IMG_SCALE * image + IMG_SHIFT. */
static int app_run(app *ap)
{
    size_t sz_k = K * sizeof(float);
    const float *bn_host[4] = {ap->bn_w, ap->bn_b, ap->bn_mean, ap->bn_var};
    CL_CHECK(clEnqueueWriteBuffer(ap->queue, ap->buf_image, CL_FALSE, 0, sizeof ap->image, ap->image, 0, NULL, NULL));
    CL_CHECK(clEnqueueWriteBuffer(ap->queue, ap->buf_w, CL_FALSE, 0, sizeof ap->weight, ap->weight, 0, NULL, NULL));
    for (int i = 0; i < 4; i++)
        CL_CHECK(clEnqueueWriteBuffer(ap->queue, ap->buf_bn[i], CL_FALSE, 0, sz_k, bn_host[i], 0, NULL, NULL));

    int n = B * C * HW;
    size_t global = (size_t)n;
    CL_CHECK(clSetKernelArg(ap->kern, 0, sizeof ap->buf_image, &ap->buf_image));
    CL_CHECK(clSetKernelArg(ap->kern, 1, sizeof ap->buf_x, &ap->buf_x));
    CL_CHECK(clSetKernelArg(ap->kern, 2, sizeof IMG_SCALE, &IMG_SCALE));
    CL_CHECK(clSetKernelArg(ap->kern, 3, sizeof IMG_SHIFT, &IMG_SHIFT));
    CL_CHECK(clSetKernelArg(ap->kern, 4, sizeof n, &n));
    CL_CHECK(clEnqueueNDRangeKernel(ap->queue, ap->kern, 1, NULL, &global, NULL, 0, NULL, NULL));
    return 1;
}

/* ---- teenycl on the same context and queue ---- */

/* A teenycl context over the application's queue, its buffers wrapped as
 * tensors (no copy), then conv + folded batch norm + SiLU and attention,
 * enqueued behind the application's kernel; nothing waits. */
static int teenycl_run(app *ap)
{
    if (teeny_ctx_create_from_cl(ap->clctx, ap->dev, ap->queue, &ap->tctx) != TEENY_OK) {
        fprintf(stderr, "embed_app: teeny_ctx_create_from_cl: %s\n", teeny_last_error(NULL));
        return 0;
    }
    teeny_ctx *tctx = ap->tctx;
    int64_t xs[4] = {B, C, H, W}, ws[4] = {K, C, KS, KS}, ks[1] = {K}, ys[4] = {B, K, H, W},
            ts[3] = {B, K, HW};
    TEENY_CHECK(teeny_tensor_wrap_cl(tctx, ap->buf_x, 0, 4, xs, &ap->x));
    TEENY_CHECK(teeny_tensor_wrap_cl(tctx, ap->buf_w, 0, 4, ws, &ap->w));
    for (int i = 0; i < 4; i++)
        TEENY_CHECK(teeny_tensor_wrap_cl(tctx, ap->buf_bn[i], 0, 1, ks, &ap->bn[i]));
    TEENY_CHECK(teeny_tensor_wrap_cl(tctx, ap->buf_scale, 0, 1, ks, &ap->sc));
    TEENY_CHECK(teeny_tensor_wrap_cl(tctx, ap->buf_shift, 0, 1, ks, &ap->sh));
    TEENY_CHECK(teeny_tensor_wrap_cl(tctx, ap->buf_y, 0, 4, ys, &ap->y));
    /* the same buffer seen as [B, K tokens, H*W]: a second wrap, no copy */
    TEENY_CHECK(teeny_tensor_wrap_cl(tctx, ap->buf_y, 0, 3, ts, &ap->tokens));
    TEENY_CHECK(teeny_tensor_wrap_cl(tctx, ap->buf_o, 0, 3, ts, &ap->o));

    teeny_conv2d_params p = TEENY_CONV2D_PARAMS_INIT;
    p.pad[0] = p.pad[1] = 1;
    TEENY_CHECK(teeny_batchnorm_fold(tctx, ap->bn[0], ap->bn[1], ap->bn[2], ap->bn[3], BN_EPS, ap->sc, ap->sh));
    TEENY_CHECK(teeny_conv2d_forward_fused(tctx, &p, ap->x, ap->w, NULL, ap->sc, ap->sh, TEENY_ACT_SILU, ap->y));
    TEENY_CHECK(teeny_attention_forward(tctx, ap->tokens, ap->tokens, ap->tokens, ATT_SCALE, ap->o, NULL));
    return 1;
}

/* The one host sync: a blocking read queued after everything above. */
static int read_result(app *ap)
{
    CL_CHECK(clEnqueueReadBuffer(ap->queue, ap->buf_o, CL_TRUE, 0, sizeof ap->out, ap->out, 0, NULL, NULL));
    return 1;
}

/* ---- the same chain on the host, in float64 ---- */

/* y = SiLU(conv3x3(x) * s + t), the batch norm folded into s and t. */
static void reference_conv(const app *ap, double *y_ref)
{
    static double x_ref[B * C * HW];
    for (int i = 0; i < B * C * HW; i++)
        x_ref[i] = (double)IMG_SCALE * ap->image[i] + IMG_SHIFT;
    for (int bi = 0; bi < B; bi++)
        for (int k = 0; k < K; k++) {
            double s = ap->bn_w[k] / sqrt((double)ap->bn_var[k] + BN_EPS), t = ap->bn_b[k] - ap->bn_mean[k] * s;
            for (int oh = 0; oh < H; oh++)
                for (int ow = 0; ow < W; ow++) {
                    double acc = 0;
                    for (int c = 0; c < C; c++)
                        for (int kh = 0; kh < KS; kh++)
                            for (int kw = 0; kw < KS; kw++) {
                                int ih = oh + kh - 1, iw = ow + kw - 1;
                                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                    acc += x_ref[((bi * C + c) * H + ih) * W + iw] *
                                           ap->weight[((k * C + c) * KS + kh) * KS + kw];
                            }
                    y_ref[((bi * K + k) * H + oh) * W + ow] = silu(acc * s + t);
                }
        }
}

/* o = softmax(y y^T * ATT_SCALE) y per image, the K channels as tokens. */
static void reference_attention(const double *y_ref, double *o_ref)
{
    for (int bi = 0; bi < B; bi++)
        for (int i = 0; i < K; i++) {
            const double *qi = y_ref + (bi * K + i) * HW;
            double logit[K], mx = -INFINITY, sum = 0;
            for (int j = 0; j < K; j++) {
                const double *kj = y_ref + (bi * K + j) * HW;
                logit[j] = 0;
                for (int d = 0; d < HW; d++)
                    logit[j] += qi[d] * kj[d];
                logit[j] *= ATT_SCALE;
                mx = logit[j] > mx ? logit[j] : mx;
            }
            for (int j = 0; j < K; j++)
                sum += exp(logit[j] - mx);
            for (int d = 0; d < HW; d++) {
                double acc = 0;
                for (int j = 0; j < K; j++)
                    acc += exp(logit[j] - mx) / sum * y_ref[(bi * K + j) * HW + d];
                o_ref[(bi * K + i) * HW + d] = acc;
            }
        }
}

/* The device's answer against the host's: 0 when it matches. */
static int compare(const app *ap)
{
    static double y_ref[B * K * HW], o_ref[B * K * HW];
    double max_ref = 0, max_err = 0;
    reference_conv(ap, y_ref);
    reference_attention(y_ref, o_ref);
    for (int i = 0; i < B * K * HW; i++) {
        double e = fabs(ap->out[i] - o_ref[i]);
        max_ref = fabs(o_ref[i]) > max_ref ? fabs(o_ref[i]) : max_ref;
        max_err = e > max_err || isnan(e) ? e : max_err;
    }
    double rel = max_err / (max_ref > 0 ? max_ref : 1);
    printf("embed_app on %s: scale_shift (own kernel) -> conv3x3 + folded BN + SiLU -> attention over %d "
           "channels, one blocking read\n",
           ap->dev_name, K);
    printf("max error %.3g (relative %.3g, limit 1e-4): %s\n", max_err, rel, rel <= 1e-4 ? "ok" : "WRONG");
    return rel <= 1e-4 ? 0 : 1;
}

/* teenycl first or last does not matter (see Ownership above); this order
 * releases each object once, with nothing left pending. */
static void release(app *ap)
{
    teeny_tensor_destroy(ap->x);
    teeny_tensor_destroy(ap->w);
    for (int i = 0; i < 4; i++)
        teeny_tensor_destroy(ap->bn[i]);
    teeny_tensor_destroy(ap->sc);
    teeny_tensor_destroy(ap->sh);
    teeny_tensor_destroy(ap->y);
    teeny_tensor_destroy(ap->tokens);
    teeny_tensor_destroy(ap->o);
    teeny_ctx_destroy(ap->tctx);
    cl_mem bufs[] = {ap->buf_image, ap->buf_x, ap->buf_w, ap->buf_bn[0], ap->buf_bn[1], ap->buf_bn[2],
                     ap->buf_bn[3], ap->buf_scale, ap->buf_shift, ap->buf_y, ap->buf_o};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            clReleaseMemObject(bufs[i]);
    if (ap->kern)
        clReleaseKernel(ap->kern);
    if (ap->prog)
        clReleaseProgram(ap->prog);
    if (ap->queue) {
        clFinish(ap->queue); /* a failure path can leave work queued: let it end first */
        clReleaseCommandQueue(ap->queue);
    }
    if (ap->clctx)
        clReleaseContext(ap->clctx);
}

int main(int argc, char **argv)
{
    static app ap; /* static: its host arrays outlive the uploads, which do not wait */
    const char *spec = NULL;
    int rc = 1;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int k = cli_next(&SPEC, argc, argv, &i, &v);
        if (k == CLI_EXIT_OK || k == CLI_EXIT_USAGE)
            return k == CLI_EXIT_OK ? 0 : 2;
        if (k == CLI_ARG)
            return cli_fail(&SPEC, "it takes no arguments besides its options");
        spec = v;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    make_inputs(&ap);
    if (!pick_device(spec, &ap.dev)) {
        fprintf(stderr, "embed_app: no OpenCL device%s%s\n", spec ? " matches " : "", spec ? spec : "");
        return 1;
    }
    if (app_setup(&ap) && app_run(&ap) && teenycl_run(&ap) && read_result(&ap))
        rc = compare(&ap);
    release(&ap);
    return rc;
}
