/*
 * fashion_net.h -- what the Fashion-MNIST training and evaluation programs
 * share: the network (a small conv net with a YOLO C2PSA attention block,
 * ~212K parameters, names matching examples/fashion_net.py), the data set,
 * and evaluation. Header-only so each example stays one program.
 *
 *   Conv(1,32,3) -> Conv(32,64,3,s2) -> Conv(64,128,3,s2) -> PSABlock(128, 4 heads)
 *   -> global average pool -> Linear(128, 10)
 * Conv(ci,co,k,s) = conv2d (padding k/2, no bias) + batchnorm2d + SiLU (the
 * last two one node, teeny_graph_batchnorm_act).
 * PSABlock(c, h): x = x + Attention(x); x = x + FFN(x), where Attention is
 * qkv = Conv(c, 2c, 1, no SiLU) -> attention over the H*W tokens per head
 * (key dim = c/h/2, scale key_dim^-1/2, the fused PSA kernel) + pe
 * (depthwise 3x3 Conv of V, no SiLU) -> proj = Conv(c, c, 1, no SiLU), and
 * FFN = Conv(c, 2c, 1) -> Conv(2c, c, 1, no SiLU).
 */
#ifndef FASHION_NET_H
#define FASHION_NET_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "teenycl.h"

#define FN_CLASSES 10
#define FN_MEAN 0.2860f
#define FN_STD 0.3530f

static const char *const fn_class_names[FN_CLASSES] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                       "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

typedef struct {
    teeny_graph *g;
    teeny_node x, labels, logits, loss;
} fn_net;

#define FN_TRY(call)                                                                              \
    do {                                                                                          \
        teeny_status fn_st_ = (call);                                                             \
        if (fn_st_ != TEENY_OK) {                                                                 \
            /* context-less calls (schedules, file metadata) report in  */                      \
            /* teeny_last_error(NULL)                                    */                      \
            const char *fn_msg_ = teeny_last_error(fn_ctx_for_errors);                            \
            fprintf(stderr, "error: %s: %s\n  (%s)\n", teeny_status_name(fn_st_),                 \
                    *fn_msg_ ? fn_msg_ : teeny_last_error(NULL), #call);                          \
            return fn_st_;                                                                        \
        }                                                                                         \
    } while (0)

static teeny_ctx *fn_ctx_for_errors;

/* Conv(ci, co, k, s, groups) with optional SiLU, named "<name>.conv", "<name>.bn". */
static inline teeny_status fn_conv(teeny_graph *g, const char *name, teeny_node x, int co, int k, int s, int groups,
                            int silu, teeny_node *out)
{
    char cn[96], bn[96];
    teeny_conv2d_params p = TEENY_CONV2D_PARAMS_INIT;
    teeny_node a;
    p.stride[0] = p.stride[1] = s;
    p.pad[0] = p.pad[1] = k / 2;
    p.groups = groups;
    snprintf(cn, sizeof cn, "%s.conv", name);
    snprintf(bn, sizeof bn, "%s.bn", name);
    FN_TRY(teeny_graph_conv2d(g, cn, x, co, k, k, &p, 0, &a));
    FN_TRY(teeny_graph_batchnorm_act(g, bn, a, 0.1f, 1e-5f, silu ? TEENY_ACT_SILU : TEENY_ACT_NONE, out));
    return TEENY_OK;
}

static inline teeny_status fn_build(teeny_ctx *ctx, uint64_t seed, fn_net *net)
{
    const int C = 128, heads = 4, key_dim = C / heads / 2;
    int64_t xs[4] = {-1, 1, 28, 28};
    teeny_node h, qkv, att, v, pe, sum, proj, ffn0, ffn1, gap;
    teeny_graph *g;
    fn_ctx_for_errors = ctx;
    FN_TRY(teeny_graph_create(ctx, seed, &g));
    net->g = g;
    FN_TRY(teeny_graph_input(g, "images", 4, xs, &net->x));
    FN_TRY(teeny_graph_labels(g, "labels", &net->labels));
    FN_TRY(fn_conv(g, "conv1", net->x, 32, 3, 1, 1, 1, &h));
    FN_TRY(fn_conv(g, "conv2", h, 64, 3, 2, 1, 1, &h));
    FN_TRY(fn_conv(g, "conv3", h, 128, 3, 2, 1, 1, &h));
    /* PSABlock */
    FN_TRY(fn_conv(g, "psa.attn.qkv", h, 2 * C, 1, 1, 1, 0, &qkv));
    FN_TRY(teeny_graph_psa_attention(g, "psa.attn.core", qkv, heads, key_dim, &att));
    FN_TRY(teeny_graph_psa_extract_v(g, "psa.attn.v", qkv, heads, key_dim, &v));
    FN_TRY(fn_conv(g, "psa.attn.pe", v, C, 3, 1, C, 0, &pe));
    FN_TRY(teeny_graph_add(g, "psa.attn.sum", att, pe, &sum));
    FN_TRY(fn_conv(g, "psa.attn.proj", sum, C, 1, 1, 1, 0, &proj));
    FN_TRY(teeny_graph_add(g, "psa.res1", h, proj, &h));
    FN_TRY(fn_conv(g, "psa.ffn.0", h, 2 * C, 1, 1, 1, 1, &ffn0));
    FN_TRY(fn_conv(g, "psa.ffn.1", ffn0, C, 1, 1, 1, 0, &ffn1));
    FN_TRY(teeny_graph_add(g, "psa.res2", h, ffn1, &h));
    FN_TRY(teeny_graph_global_avgpool(g, "pool", h, &gap));
    FN_TRY(teeny_graph_linear(g, "fc", gap, FN_CLASSES, 1, &net->logits));
    FN_TRY(teeny_graph_softmax_cross_entropy(g, "loss", net->logits, net->labels, &net->loss));
    FN_TRY(teeny_graph_mark_output(g, net->logits));
    return TEENY_OK;
}

static inline int64_t fn_param_count(const fn_net *net)
{
    int64_t total = 0;
    for (int i = 0; i < teeny_graph_param_count(net->g); i++) {
        teeny_tensor *t;
        if (teeny_graph_param(net->g, i, NULL, &t, NULL) == TEENY_OK)
            total += teeny_tensor_numel(t);
    }
    return total;
}

/* ---- data ---- */

typedef struct {
    teeny_idx *images, *labels;
    int64_t n;
} fn_split;

static inline int fn_load_split(const char *dir, const char *prefix, fn_split *s)
{
    char ip[1024], lp[1024];
    teeny_status st;
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    if ((st = teeny_idx_load(ip, &s->images)) != TEENY_OK || (st = teeny_idx_load(lp, &s->labels)) != TEENY_OK) {
        fprintf(stderr, "error: %s\n(install Debian's dataset-fashion-mnist or pass --data DIR)\n",
                teeny_last_error(NULL));
        return 1;
    }
    if (teeny_idx_ndim(s->images) != 3 || teeny_idx_dim(s->images, 1) != 28 || teeny_idx_dim(s->images, 2) != 28 ||
        teeny_idx_dim(s->images, 0) != teeny_idx_dim(s->labels, 0)) {
        fprintf(stderr, "error: %s does not hold 28x28 images matching %s\n", ip, lp);
        return 1;
    }
    if ((st = teeny_idx_check_labels(s->labels, FN_CLASSES)) != TEENY_OK) {
        fprintf(stderr, "error: %s\n", teeny_last_error(NULL));
        return 1;
    }
    s->n = teeny_idx_dim(s->images, 0);
    return 0;
}

static inline void fn_free_split(fn_split *s)
{
    teeny_idx_destroy(s->images);
    teeny_idx_destroy(s->labels);
}

/* Normalized image i (optionally mirrored) into dst[784]. */
static inline void fn_image(const fn_split *s, int64_t i, int flip, float *dst)
{
    const uint8_t *src = teeny_idx_data(s->images) + i * 784;
    for (int r = 0; r < 28; r++)
        for (int c = 0; c < 28; c++)
            dst[r * 28 + c] = ((float)src[r * 28 + (flip ? 27 - c : c)] / 255.0f - FN_MEAN) / FN_STD;
}

/* ---- evaluation ---- */

typedef struct {
    double accuracy, images_per_s;
    int64_t confusion[FN_CLASSES][FN_CLASSES]; /* [true][predicted] */
} fn_eval_result;

static inline double fn_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Inference over the whole split: full batches through eval_full, the
 * remainder through eval_tail (NULL when batch divides n). */
static inline teeny_status fn_evaluate(const fn_net *net, teeny_plan *eval_full, teeny_plan *eval_tail, int64_t batch,
                                const fn_split *s, fn_eval_result *res)
{
    float *x = malloc((size_t)batch * 784 * sizeof *x), *logits = malloc((size_t)batch * FN_CLASSES * sizeof *logits);
    teeny_status st = TEENY_OK;
    int64_t correct = 0;
    double t0 = fn_now();
    memset(res, 0, sizeof *res);
    if (!x || !logits) {
        free(x);
        free(logits);
        return TEENY_ERR_NOMEM;
    }
    for (int64_t start = 0; start < s->n && st == TEENY_OK; start += batch) {
        int64_t b = s->n - start < batch ? s->n - start : batch;
        teeny_plan *p = b == batch ? eval_full : eval_tail;
        teeny_tensor *tx;
        if (!p) {
            st = TEENY_ERR_STATE;
            break;
        }
        for (int64_t i = 0; i < b; i++)
            fn_image(s, start + i, 0, x + i * 784);
        if ((st = teeny_plan_tensor(p, net->x, &tx)) != TEENY_OK || (st = teeny_tensor_write(tx, x, (size_t)b * 784)) != TEENY_OK ||
            (st = teeny_plan_forward(p)) != TEENY_OK ||
            (st = teeny_plan_read(p, net->logits, logits, (size_t)b * FN_CLASSES)) != TEENY_OK)
            break;
        const uint8_t *labels = teeny_idx_data(s->labels) + start;
        for (int64_t i = 0; i < b; i++) {
            int best = 0;
            for (int c = 1; c < FN_CLASSES; c++)
                if (logits[i * FN_CLASSES + c] > logits[i * FN_CLASSES + best])
                    best = c;
            res->confusion[labels[i]][best]++;
            correct += best == labels[i];
        }
    }
    double dt = fn_now() - t0;
    res->accuracy = (double)correct / (double)s->n;
    res->images_per_s = dt > 0 ? (double)s->n / dt : 0;
    free(x);
    free(logits);
    return st;
}

static inline void fn_print_confusion(const fn_eval_result *r, FILE *out)
{
    fprintf(out, "confusion matrix (rows: true class, columns: predicted)\n%14s", "");
    for (int c = 0; c < FN_CLASSES; c++)
        fprintf(out, " %5d", c);
    fprintf(out, "   accuracy\n");
    for (int t = 0; t < FN_CLASSES; t++) {
        int64_t row = 0;
        fprintf(out, "%d %-12s", t, fn_class_names[t]);
        for (int c = 0; c < FN_CLASSES; c++) {
            fprintf(out, " %5lld", (long long)r->confusion[t][c]);
            row += r->confusion[t][c];
        }
        fprintf(out, "   %.4f\n", row ? (double)r->confusion[t][t] / (double)row : 0.0);
    }
}

#endif
