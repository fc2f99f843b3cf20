/*
 * test_alias.c -- aliasing and lifetime. Every eager op, at small shapes,
 * is called once with all its tensors as disjoint views of one arena (must
 * succeed: the shapes are valid) and then once per (output, other tensor)
 * pair with that output moved to overlap the other tensor by all but one
 * element: each must be TEENY_ERR_ARG naming the overlap, with the arena
 * unchanged (checked before anything is enqueued). Ops documented to allow
 * exact aliasing (teeny_add's y with a or b, element-wise in place) also
 * run with the output exactly on each input. Run under ASan (make
 * check-asan) this also checks that no eager op reads or writes host
 * memory out of bounds at these shapes.
 *
 * The second half compiles 200 small random graphs (seeded) dominated by
 * fan-out and concatenation -- values consumed many times, by concats of
 * 1..8 inputs with repeats -- with two heads (two losses, two plans over
 * the shared parameters) and dead branches, and checks each one's
 * gradients by central differences in one random direction per graph
 * after the other plan's backward, and that every parameter off the
 * checked loss's path has a zero gradient, so the executor's gradient
 * accumulation, temporaries and overwriting are exercised on shapes
 * nobody wrote by hand.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- eager ops ---- */

#define MAX_T 10
#define SLOT 512 /* elements per tensor slot in the arena; every shape fits */

typedef struct {
    const char *name;
    int n_in, n;          /* t[0..n_in) inputs, t[n_in..n) outputs (in-place state counts as output) */
    int ndim[MAX_T];
    int64_t shape[MAX_T][4];
    int i32[MAX_T];       /* int32 tensors live in another buffer: no aliasing to test */
    int exact_ok;         /* an output may be exactly an input */
    teeny_status (*call)(teeny_ctx *ctx, teeny_tensor **t);
} op_spec;

static const teeny_pool2d_params POOL = TEENY_POOL2D_PARAMS_INIT;
static const teeny_conv2d_params CONV = TEENY_CONV2D_PARAMS_INIT;

static teeny_status c_add(teeny_ctx *c, teeny_tensor **t) { return teeny_add(c, t[0], t[1], t[2]); }
static teeny_status c_mul(teeny_ctx *c, teeny_tensor **t) { return teeny_mul(c, t[0], t[1], t[2]); }
static teeny_status c_mul_b(teeny_ctx *c, teeny_tensor **t) { return teeny_mul_backward(c, t[0], t[1], t[2], t[3], t[4]); }
static teeny_status c_act_f(teeny_ctx *c, teeny_tensor **t) { return teeny_activation_forward(c, TEENY_ACT_SILU, t[0], t[1]); }
static teeny_status c_act_b(teeny_ctx *c, teeny_tensor **t) { return teeny_activation_backward(c, TEENY_ACT_SILU, t[0], t[1], t[2]); }
static teeny_status c_bn_ft(teeny_ctx *c, teeny_tensor **t)
{
    return teeny_batchnorm_forward_train(c, t[0], t[1], t[2], t[3], t[4], 0.1f, 1e-5f, t[5], t[6], t[7]);
}
static teeny_status c_bn_fi(teeny_ctx *c, teeny_tensor **t)
{
    return teeny_batchnorm_forward_infer(c, t[0], t[1], t[2], t[3], t[4], 1e-5f, t[5]);
}
static teeny_status c_bn_bt(teeny_ctx *c, teeny_tensor **t)
{
    return teeny_batchnorm_backward_train(c, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]);
}
static teeny_status c_bn_bf(teeny_ctx *c, teeny_tensor **t)
{
    return teeny_batchnorm_backward_frozen(c, t[0], t[1], t[2], t[3], t[4], 1e-5f, t[5], t[6], t[7]);
}
static teeny_status c_bn_fold(teeny_ctx *c, teeny_tensor **t)
{
    return teeny_batchnorm_fold(c, t[0], t[1], t[2], t[3], 1e-5f, t[4], t[5]);
}
static teeny_status c_conv_f(teeny_ctx *c, teeny_tensor **t) { return teeny_conv2d_forward(c, &CONV, t[0], t[1], t[2], t[3]); }
static teeny_status c_conv_ff(teeny_ctx *c, teeny_tensor **t)
{
    return teeny_conv2d_forward_fused(c, &CONV, t[0], t[1], t[2], t[3], t[4], TEENY_ACT_SILU, t[5]);
}
static teeny_status c_conv_b(teeny_ctx *c, teeny_tensor **t)
{
    return teeny_conv2d_backward(c, &CONV, t[0], t[1], t[2], t[3], t[4], t[5]);
}
static teeny_status c_att_f(teeny_ctx *c, teeny_tensor **t) { return teeny_attention_forward(c, t[0], t[1], t[2], 0.5f, t[3], t[4]); }
static teeny_status c_att_b(teeny_ctx *c, teeny_tensor **t)
{
    return teeny_attention_backward(c, t[0], t[1], t[2], t[3], t[4], t[5], 0.5f, t[6], t[7], t[8]);
}
static teeny_status c_psa_f(teeny_ctx *c, teeny_tensor **t) { return teeny_psa_attention_forward(c, t[0], 1, 2, t[1], t[2]); }
static teeny_status c_psa_b(teeny_ctx *c, teeny_tensor **t)
{
    return teeny_psa_attention_backward(c, t[0], 1, 2, t[1], t[2], t[3], t[4]);
}
static teeny_status c_pack(teeny_ctx *c, teeny_tensor **t) { return teeny_psa_pack_qkv(c, t[0], 1, 2, t[1]); }
static teeny_status c_pack_b(teeny_ctx *c, teeny_tensor **t) { return teeny_psa_pack_qkv_backward(c, t[0], 1, 2, t[1]); }
static teeny_status c_xv(teeny_ctx *c, teeny_tensor **t) { return teeny_psa_extract_v(c, t[0], 1, 2, t[1]); }
static teeny_status c_xv_b(teeny_ctx *c, teeny_tensor **t) { return teeny_psa_extract_v_backward(c, t[0], 1, 2, t[1]); }
static teeny_status c_merge(teeny_ctx *c, teeny_tensor **t) { return teeny_psa_merge_attn(c, t[0], t[1], 1, t[2]); }
static teeny_status c_merge_b(teeny_ctx *c, teeny_tensor **t) { return teeny_psa_merge_attn_backward(c, t[0], 1, t[1], t[2]); }
static teeny_status c_maxp_f(teeny_ctx *c, teeny_tensor **t) { return teeny_maxpool2d_forward(c, &POOL, t[0], t[1], t[2]); }
static teeny_status c_maxp_b(teeny_ctx *c, teeny_tensor **t) { return teeny_maxpool2d_backward(c, &POOL, t[0], t[1], t[2], t[3]); }
static teeny_status c_avgp_f(teeny_ctx *c, teeny_tensor **t) { return teeny_avgpool2d_forward(c, &POOL, t[0], t[1]); }
static teeny_status c_avgp_b(teeny_ctx *c, teeny_tensor **t) { return teeny_avgpool2d_backward(c, &POOL, t[0], t[1], t[2]); }
static teeny_status c_gap_f(teeny_ctx *c, teeny_tensor **t) { return teeny_global_avgpool_forward(c, t[0], t[1]); }
static teeny_status c_gap_b(teeny_ctx *c, teeny_tensor **t) { return teeny_global_avgpool_backward(c, t[0], t[1]); }
static teeny_status c_lin_f(teeny_ctx *c, teeny_tensor **t) { return teeny_linear_forward(c, t[0], t[1], t[2], t[3]); }
static teeny_status c_lin_b(teeny_ctx *c, teeny_tensor **t) { return teeny_linear_backward(c, t[0], t[1], t[2], t[3], t[4], t[5]); }
static teeny_status c_ce_f(teeny_ctx *c, teeny_tensor **t) { return teeny_softmax_cross_entropy_forward(c, t[0], t[1], t[2], t[3]); }
static teeny_status c_ce_b(teeny_ctx *c, teeny_tensor **t) { return teeny_softmax_cross_entropy_backward(c, t[0], t[1], t[2], t[3]); }
static const teeny_resize2d_params RESIZE = {TEENY_RESIZE_LINEAR, TEENY_RESIZE_HALF_PIXEL, TEENY_RESIZE_FLOOR, {6, 3},
                                             {0.0f, 0.0f}};
static teeny_status c_rs_f(teeny_ctx *c, teeny_tensor **t) { return teeny_resize2d_forward(c, &RESIZE, t[0], t[1]); }
static teeny_status c_rs_b(teeny_ctx *c, teeny_tensor **t) { return teeny_resize2d_backward(c, &RESIZE, t[0], t[1]); }
static const teeny_ce_params ce_ii = {TEENY_REDUCTION_SUM, 1, 0};
static teeny_status c_cex_f(teeny_ctx *c, teeny_tensor **t) { return teeny_softmax_cross_entropy_ex_forward(c, t[0], t[1], t[2], &ce_ii, t[3], t[4]); }
static teeny_status c_cex_b(teeny_ctx *c, teeny_tensor **t) { return teeny_softmax_cross_entropy_ex_backward(c, t[0], t[1], t[2], &ce_ii, t[3], t[4]); }
/* group B (teeny_maxpool2d_indices reads fp32 and writes int32 only: nothing to alias) */
static teeny_status c_gmp_f(teeny_ctx *c, teeny_tensor **t) { return teeny_global_maxpool_forward(c, t[0], t[1], t[2]); }
static teeny_status c_gmp_b(teeny_ctx *c, teeny_tensor **t) { return teeny_global_maxpool_backward(c, t[0], t[1], t[2]); }
static const teeny_conv_transpose2d_params CONVT = TEENY_CONV_TRANSPOSE2D_PARAMS_INIT;
static teeny_status c_convt_f(teeny_ctx *c, teeny_tensor **t) { return teeny_conv_transpose2d_forward(c, &CONVT, t[0], t[1], t[2], t[3]); }
static teeny_status c_convt_b(teeny_ctx *c, teeny_tensor **t)
{
    return teeny_conv_transpose2d_backward(c, &CONVT, t[0], t[1], t[2], t[3], t[4], t[5]);
}
static teeny_status c_cat(teeny_ctx *c, teeny_tensor **t)
{
    const teeny_tensor *xs[2] = {t[0], t[1]};
    return teeny_concat_channels(c, 2, xs, t[2]);
}
static teeny_status c_split(teeny_ctx *c, teeny_tensor **t)
{
    teeny_tensor *ys[2] = {t[1], t[2]};
    return teeny_split_channels(c, t[0], 2, ys);
}

#define X4 4, {2, 4, 4, 4}
#define Y4 4, {2, 4, 2, 2}
#define V4 1, {4}

static const op_spec OPS[] = {
    {"add", 2, 3, {4, 4, 4}, {{2, 4, 4, 4}, {2, 4, 4, 4}, {2, 4, 4, 4}}, {0}, 1, c_add},
    {"mul", 2, 3, {4, 4, 4}, {{2, 4, 4, 4}, {2, 4, 4, 4}, {2, 4, 4, 4}}, {0}, 1, c_mul},
    {"mul_backward", 3, 5, {4, 4, 4, 4, 4}, {{2, 4, 4, 4}, {2, 4, 4, 4}, {2, 4, 4, 4}, {2, 4, 4, 4}, {2, 4, 4, 4}}, {0}, 1, c_mul_b},
    {"activation_forward", 1, 2, {4, 4}, {{2, 4, 4, 4}, {2, 4, 4, 4}}, {0}, 1, c_act_f},
    {"activation_backward", 2, 3, {4, 4, 4}, {{2, 4, 4, 4}, {2, 4, 4, 4}, {2, 4, 4, 4}}, {0}, 1, c_act_b},
    {"batchnorm_forward_train", 3, 8, {4, 1, 1, 1, 1, 4, 1, 1},
     {{2, 4, 4, 4}, {4}, {4}, {4}, {4}, {2, 4, 4, 4}, {4}, {4}}, {0}, 0, c_bn_ft},
    {"batchnorm_forward_infer", 5, 6, {4, 1, 1, 1, 1, 4}, {{2, 4, 4, 4}, {4}, {4}, {4}, {4}, {2, 4, 4, 4}}, {0}, 0, c_bn_fi},
    {"batchnorm_backward_train", 5, 8, {4, 4, 1, 1, 1, 4, 1, 1},
     {{2, 4, 4, 4}, {2, 4, 4, 4}, {4}, {4}, {4}, {2, 4, 4, 4}, {4}, {4}}, {0}, 0, c_bn_bt},
    {"batchnorm_backward_frozen", 5, 8, {4, 4, 1, 1, 1, 4, 1, 1},
     {{2, 4, 4, 4}, {2, 4, 4, 4}, {4}, {4}, {4}, {2, 4, 4, 4}, {4}, {4}}, {0}, 0, c_bn_bf},
    {"batchnorm_fold", 4, 6, {1, 1, 1, 1, 1, 1}, {{4}, {4}, {4}, {4}, {4}, {4}}, {0}, 0, c_bn_fold},
    {"conv2d_forward", 3, 4, {4, 4, 1, 4}, {{2, 4, 4, 4}, {4, 4, 3, 3}, {4}, {2, 4, 2, 2}}, {0}, 0, c_conv_f},
    {"conv2d_forward_fused", 5, 6, {4, 4, 1, 1, 1, 4}, {{2, 4, 4, 4}, {4, 4, 3, 3}, {4}, {4}, {4}, {2, 4, 2, 2}}, {0}, 0,
     c_conv_ff},
    {"conv2d_backward", 3, 6, {4, 4, 4, 4, 4, 1}, {{2, 4, 4, 4}, {4, 4, 3, 3}, {2, 4, 2, 2}, {2, 4, 4, 4}, {4, 4, 3, 3}, {4}},
     {0}, 0, c_conv_b},
    {"attention_forward", 3, 5, {3, 3, 3, 3, 2}, {{2, 4, 8}, {2, 4, 8}, {2, 4, 8}, {2, 4, 8}, {2, 4}}, {0}, 0, c_att_f},
    {"attention_backward", 6, 9, {3, 3, 3, 3, 2, 3, 3, 3, 3},
     {{2, 4, 8}, {2, 4, 8}, {2, 4, 8}, {2, 4, 8}, {2, 4}, {2, 4, 8}, {2, 4, 8}, {2, 4, 8}, {2, 4, 8}}, {0}, 0, c_att_b},
    {"psa_attention_forward", 1, 3, {4, 4, 2}, {{1, 8, 2, 2}, {1, 4, 2, 2}, {1, 4}}, {0}, 0, c_psa_f},
    {"psa_attention_backward", 4, 5, {4, 4, 2, 4, 4}, {{1, 8, 2, 2}, {1, 4, 2, 2}, {1, 4}, {1, 4, 2, 2}, {1, 8, 2, 2}}, {0}, 0,
     c_psa_b},
    {"psa_pack_qkv", 1, 2, {4, 4}, {{1, 8, 2, 2}, {4, 1, 4, 2}}, {0}, 0, c_pack},
    {"psa_pack_qkv_backward", 1, 2, {4, 4}, {{4, 1, 4, 2}, {1, 8, 2, 2}}, {0}, 0, c_pack_b},
    {"psa_extract_v", 1, 2, {4, 4}, {{1, 8, 2, 2}, {1, 4, 2, 2}}, {0}, 0, c_xv},
    {"psa_extract_v_backward", 1, 2, {4, 4}, {{1, 4, 2, 2}, {1, 8, 2, 2}}, {0}, 0, c_xv_b},
    {"psa_merge_attn", 2, 3, {3, 3, 4}, {{1, 4, 2}, {1, 4, 2}, {1, 4, 2, 2}}, {0}, 0, c_merge},
    {"psa_merge_attn_backward", 1, 3, {4, 3, 3}, {{1, 4, 2, 2}, {1, 4, 2}, {1, 4, 2}}, {0}, 0, c_merge_b},
    {"maxpool2d_forward", 1, 3, {4, 4, 4}, {{2, 4, 4, 4}, {2, 4, 2, 2}, {2, 4, 2, 2}}, {0, 0, 1}, 0, c_maxp_f},
    {"maxpool2d_backward", 3, 4, {4, 4, 4, 4}, {{2, 4, 4, 4}, {2, 4, 2, 2}, {2, 4, 2, 2}, {2, 4, 4, 4}}, {0, 1, 0, 0}, 0,
     c_maxp_b},
    {"avgpool2d_forward", 1, 2, {4, 4}, {{2, 4, 4, 4}, {2, 4, 2, 2}}, {0}, 0, c_avgp_f},
    {"avgpool2d_backward", 2, 3, {4, 4, 4}, {{2, 4, 4, 4}, {2, 4, 2, 2}, {2, 4, 4, 4}}, {0}, 0, c_avgp_b},
    {"global_avgpool_forward", 1, 2, {4, 4}, {{2, 4, 4, 4}, {2, 4, 1, 1}}, {0}, 0, c_gap_f},
    {"global_avgpool_backward", 1, 2, {4, 4}, {{2, 4, 1, 1}, {2, 4, 4, 4}}, {0}, 0, c_gap_b},
    {"linear_forward", 3, 4, {2, 2, 1, 2}, {{2, 8}, {3, 8}, {3}, {2, 3}}, {0}, 0, c_lin_f},
    {"linear_backward", 3, 6, {2, 2, 2, 2, 2, 1}, {{2, 8}, {3, 8}, {2, 3}, {2, 8}, {3, 8}, {3}}, {0}, 0, c_lin_b},
    {"softmax_cross_entropy_forward", 2, 4, {2, 1, 1, 2}, {{2, 3}, {2}, {1}, {2, 3}}, {0, 1, 0, 0}, 0, c_ce_f},
    {"softmax_cross_entropy_backward", 3, 4, {2, 1, 1, 2}, {{2, 3}, {2}, {1}, {2, 3}}, {0, 1, 0, 0}, 0, c_ce_b},
    {"softmax_cross_entropy_ex_forward", 3, 5, {2, 1, 1, 1, 2}, {{2, 3}, {2}, {3}, {1}, {2, 3}}, {0, 1, 0, 0, 0}, 0, c_cex_f},
    {"softmax_cross_entropy_ex_backward", 4, 5, {2, 1, 1, 1, 2}, {{2, 3}, {2}, {3}, {1}, {2, 3}}, {0, 1, 0, 0, 0}, 0, c_cex_b},
    {"concat_channels", 2, 3, {4, 4, 4}, {{2, 2, 2, 2}, {2, 2, 2, 2}, {2, 4, 2, 2}}, {0}, 0, c_cat},
    {"split_channels", 1, 3, {4, 4, 4}, {{2, 4, 2, 2}, {2, 2, 2, 2}, {2, 2, 2, 2}}, {0}, 0, c_split},
    /* group B */
    {"global_maxpool_forward", 1, 3, {4, 2, 2}, {{2, 4, 4, 4}, {2, 4}, {2, 4}}, {0, 0, 1}, 0, c_gmp_f},
    {"global_maxpool_backward", 2, 3, {2, 2, 4}, {{2, 4}, {2, 4}, {2, 4, 4, 4}}, {1, 0, 0}, 0, c_gmp_b},
    {"conv_transpose2d_forward", 3, 4, {4, 4, 1, 4}, {{2, 4, 2, 2}, {4, 3, 3, 3}, {3}, {2, 3, 4, 4}}, {0}, 0, c_convt_f},
    {"conv_transpose2d_backward", 3, 6, {4, 4, 4, 4, 4, 1},
     {{2, 4, 2, 2}, {4, 3, 3, 3}, {2, 3, 4, 4}, {2, 4, 2, 2}, {4, 3, 3, 3}, {3}}, {0}, 0, c_convt_b},
    /* resize */
    {"resize2d_forward", 1, 2, {4, 4}, {{2, 3, 4, 5}, {2, 3, 6, 3}}, {0}, 0, c_rs_f},
    {"resize2d_backward", 1, 2, {4, 4}, {{2, 3, 6, 3}, {2, 3, 4, 5}}, {0}, 0, c_rs_b},
};
#define N_OPS ((int)(sizeof OPS / sizeof OPS[0]))

static int64_t numel_of(const op_spec *op, int i)
{
    int64_t n = 1;
    for (int d = 0; d < op->ndim[i]; d++)
        n *= op->shape[i][d];
    return n;
}

/* Views of the arenas at the given element offsets; calls the op. */
static teeny_status run_at(teeny_ctx *ctx, const op_spec *op, teeny_tensor *arena, teeny_tensor *iarena,
                           const int64_t *off)
{
    teeny_tensor *t[MAX_T] = {0};
    teeny_status st;
    for (int i = 0; i < op->n; i++)
        TH_OK(ctx, teeny_tensor_view(op->i32[i] ? iarena : arena, off[i], op->ndim[i], op->shape[i], &t[i]));
    st = op->call(ctx, t);
    for (int i = 0; i < op->n; i++)
        teeny_tensor_destroy(t[i]);
    return st;
}

START_TEST(test_alias_eager_ops)
{
    teeny_ctx *ctx = th_ctx();
    const op_spec *op = &OPS[_i];
    int64_t an = SLOT * (MAX_T + 1), off[MAX_T];
    teeny_tensor *arena = th_tensor(ctx, 1, &an), *iarena = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, &an, &iarena));
    int32_t *zeros = calloc((size_t)an, sizeof *zeros);
    TH_OK(ctx, teeny_tensor_write_i32(iarena, zeros, (size_t)an));
    free(zeros);
    /* values in a safe range (positive variances, finite everything) */
    th_rng r = th_rng_make(100 + (uint64_t)_i);
    float *init = th_malloc((size_t)an * sizeof *init);
    th_fill_uniform(&r, init, (size_t)an, 0.5, 1.5);
    TH_OK(ctx, teeny_tensor_write(arena, init, (size_t)an));
    for (int i = 0; i < op->n; i++) {
        ck_assert_int_le(numel_of(op, i), SLOT);
        off[i] = (int64_t)i * SLOT;
    }
    /* control: disjoint views are accepted */
    TH_OK(ctx, run_at(ctx, op, arena, iarena, off));
    TH_OK(ctx, teeny_tensor_write(arena, init, (size_t)an));
    int pairs = 0;
    for (int o = op->n_in; o < op->n; o++) {
        if (op->i32[o])
            continue;
        for (int j = 0; j < op->n; j++) {
            if (j == o || op->i32[j])
                continue;
            int64_t saved = off[o];
            for (int exact = 0; exact < 2; exact++) {
                int same_shape = numel_of(op, o) == numel_of(op, j);
                if (exact && !same_shape)
                    continue;
                /* shifted by one element: all but one overlapping (a
                 * one-element tensor is overlapped from its start) */
                if (!exact && numel_of(op, j) == 1 && same_shape)
                    continue;
                off[o] = off[j] + (exact || numel_of(op, j) == 1 ? 0 : 1);
                teeny_status st = run_at(ctx, op, arena, iarena, off);
                off[o] = saved;
                /* exact aliasing of an output with an input is allowed
                 * only where documented, and never between two outputs */
                int allowed = exact && op->exact_ok && j < op->n_in;
                if (allowed) {
                    ck_assert_msg(st == TEENY_OK, "%s: output %d exactly on input %d: %s (%s)", op->name, o, j,
                                  teeny_status_name(st), teeny_last_error(ctx));
                    TH_OK(ctx, teeny_tensor_write(arena, init, (size_t)an));
                    continue;
                }
                ck_assert_msg(st == TEENY_ERR_ARG, "%s: output %d %s tensor %d: %s, want TEENY_ERR_ARG (%s)", op->name,
                              o, exact ? "exactly on" : "overlapping", j, teeny_status_name(st),
                              teeny_last_error(ctx));
                ck_assert_msg(strstr(teeny_last_error(ctx), "overlap") != NULL, "%s: message %s", op->name,
                              teeny_last_error(ctx));
                float *now = th_read(arena);
                ck_assert_msg(!memcmp(now, init, (size_t)an * sizeof *now), "%s: a rejected call wrote", op->name);
                free(now);
                pairs++;
            }
        }
    }
    ck_assert_int_gt(pairs, 0);
    free(init);
    teeny_tensor_destroy(arena);
    teeny_tensor_destroy(iarena);
}
END_TEST

/* ---- random fan-out / concat graphs ---- */

#define RG_PER_LOOP 25 /* graphs per loop iteration; 8 iterations: 200 graphs */

typedef struct {
    teeny_node node;
    int channels;
    uint64_t params;  /* bit i: parameter i (creation order) is upstream of this value */
} rg_value;

typedef struct {
    teeny_graph *g;
    teeny_node x, labels, loss[2];
    uint64_t reach[2]; /* the parameters upstream of each loss */
} rg_graph;

/* Parameter bits a builder call just added (the graph's count went from n0). */
static uint64_t rg_new_params(const teeny_graph *g, int n0)
{
    uint64_t bits = 0;
    int n1 = teeny_graph_param_count(g);
    ck_assert_int_lt(n1, 64);
    for (int i = n0; i < n1; i++)
        bits |= (uint64_t)1 << i;
    return bits;
}

/* A head: concat of the values -> global avgpool -> linear -> cross-entropy. */
static void rg_head(teeny_graph *g, const rg_value *vals, int n, teeny_node labels, const char *loss_name,
                    teeny_node *loss, uint64_t *reach)
{
    teeny_ctx *ctx = th_ctx();
    teeny_node in[16], cat, gap, fc;
    *reach = 0;
    for (int k = 0; k < n; k++) {
        in[k] = vals[k].node;
        *reach |= vals[k].params;
    }
    TH_OK(ctx, teeny_graph_concat(g, NULL, n, in, &cat));
    TH_OK(ctx, teeny_graph_global_avgpool(g, NULL, cat, &gap));
    int n0 = teeny_graph_param_count(g);
    TH_OK(ctx, teeny_graph_linear(g, NULL, gap, 3, 1, &fc));
    *reach |= rg_new_params(g, n0);
    TH_OK(ctx, teeny_graph_softmax_cross_entropy(g, loss_name, fc, labels, loss));
}

/* One random graph: a 1x1 conv of the input, then 3..7 steps each adding a
 * concat of 1..8 pool values (repeats allowed, so one value feeds a concat
 * several times), a residual add, a SiLU, a channel slice or a 1x1 conv.
 * Every value left unconsumed goes to head A, head B, both, or nowhere (a
 * dead branch), and sometimes a 1x1 conv off a random value feeds nothing
 * (a dead parameter): two losses over shared parameters, some of which
 * reach one loss, both or neither. Only smooth ops, so central
 * differences are exact up to rounding. */
static void rg_build(th_rng *r, rg_graph *out)
{
    teeny_ctx *ctx = th_ctx();
    teeny_conv2d_params p1 = TEENY_CONV2D_PARAMS_INIT;
    rg_value pool[16];
    int used[16] = {0}, n = 0, n0;
    int cin = th_int(r, 1, 3);
    int64_t xs[4] = {-1, cin, 2, 2};
    teeny_graph *g;
    teeny_node v;
    TH_OK(ctx, teeny_graph_create(ctx, th_next(r), &g));
    TH_OK(ctx, teeny_graph_input(g, "x", 4, xs, &out->x));
    TH_OK(ctx, teeny_graph_labels(g, "labels", &out->labels));
    int c0 = th_int(r, 1, 3);
    TH_OK(ctx, teeny_graph_conv2d(g, NULL, out->x, c0, 1, 1, &p1, 1, &v));
    pool[n++] = (rg_value){v, c0, rg_new_params(g, 0)};
    int steps = th_int(r, 3, 7);
    for (int s = 0; s < steps && n < 15; s++) {
        int kind = th_int(r, 0, 5), a = th_int(r, 0, n - 1);
        rg_value out_v = {-1, 0, 0};
        n0 = teeny_graph_param_count(g);
        if (kind <= 1) { /* concat (twice as likely) */
            int m = th_int(r, 1, 8), ch = 0, taken = 0;
            teeny_node in[8];
            for (int i = 0; i < m; i++) {
                int k = th_int(r, 0, n - 1);
                if (ch + pool[k].channels > 24)
                    break;
                in[taken++] = pool[k].node;
                ch += pool[k].channels;
                out_v.params |= pool[k].params;
                used[k] = 1;
            }
            if (!taken)
                continue;
            TH_OK(ctx, teeny_graph_concat(g, NULL, taken, in, &out_v.node));
            out_v.channels = ch;
        } else if (kind == 2) { /* residual add with a value of the same width */
            int b = -1;
            for (int k = 0; k < n; k++)
                if (pool[k].channels == pool[a].channels && (b < 0 || th_int(r, 0, 1)))
                    b = k;
            TH_OK(ctx, teeny_graph_add(g, NULL, pool[a].node, pool[b].node, &out_v.node));
            out_v.channels = pool[a].channels;
            out_v.params = pool[a].params | pool[b].params;
            used[a] = used[b] = 1;
        } else if (kind == 3) {
            TH_OK(ctx, teeny_graph_activation(g, NULL, pool[a].node, TEENY_ACT_SILU, &out_v.node));
            out_v.channels = pool[a].channels;
            out_v.params = pool[a].params;
            used[a] = 1;
        } else if (kind == 4) {
            int c = pool[a].channels, start = th_int(r, 0, c - 1), count = th_int(r, 1, c - start);
            TH_OK(ctx, teeny_graph_slice_channels(g, NULL, pool[a].node, start, count, &out_v.node));
            out_v.channels = count;
            out_v.params = pool[a].params;
            used[a] = 1;
        } else {
            int co = th_int(r, 1, 4);
            TH_OK(ctx, teeny_graph_conv2d(g, NULL, pool[a].node, co, 1, 1, &p1, th_int(r, 0, 1), &out_v.node));
            out_v.channels = co;
            out_v.params = pool[a].params | rg_new_params(g, n0);
            used[a] = 1;
        }
        pool[n++] = out_v;
    }
    if (th_int(r, 0, 1)) { /* a dead parameter: a conv whose value nothing consumes */
        teeny_node dead;
        TH_OK(ctx, teeny_graph_conv2d(g, NULL, pool[th_int(r, 0, n - 1)].node, 2, 1, 1, &p1, 1, &dead));
    }
    /* each unconsumed value: head A, head B, both or none (never both
     * heads empty: the first unconsumed value goes to A, the last to B) */
    rg_value tail[2][16];
    int nt[2] = {0, 0};
    for (int k = 0; k < n; k++) {
        if (used[k])
            continue;
        int to = th_int(r, 0, 4); /* 0: none, 1: A, 2: B, 3-4: both */
        if (to == 1 || to >= 3 || !nt[0])
            tail[0][nt[0]++] = pool[k];
        if (to >= 2 || (k == n - 1 && !nt[1]))
            tail[1][nt[1]++] = pool[k];
    }
    if (!nt[1])
        tail[1][nt[1]++] = pool[th_int(r, 0, n - 1)];
    rg_head(g, tail[0], nt[0], out->labels, "loss_a", &out->loss[0], &out->reach[0]);
    rg_head(g, tail[1], nt[1], out->labels, "loss_b", &out->loss[1], &out->reach[1]);
    out->g = g;
}

/* All parameters (or their gradients) as one host vector. */
static double *rg_params(teeny_graph *g, int grads, size_t *total)
{
    size_t n = 0, at = 0;
    teeny_tensor *v, *d;
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        TH_OK(th_ctx(), teeny_graph_param(g, i, NULL, &v, &d));
        n += (size_t)teeny_tensor_numel(v);
    }
    double *out = th_malloc(n * sizeof *out);
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        TH_OK(th_ctx(), teeny_graph_param(g, i, NULL, &v, &d));
        float *h = th_read(grads ? d : v);
        for (int64_t j = 0; j < teeny_tensor_numel(v); j++)
            out[at++] = h[j];
        free(h);
    }
    *total = n;
    return out;
}

/* Parameters theta + s dir (rounded to fp32); returns the realised step's
 * dot product with g (see test_graph.c's gradcheck for why). */
static double rg_set(teeny_graph *g, const double *theta, const double *dir, double s, const double *grad)
{
    size_t at = 0;
    double dot = 0;
    teeny_tensor *v;
    for (int i = 0; i < teeny_graph_param_count(g); i++) {
        TH_OK(th_ctx(), teeny_graph_param(g, i, NULL, &v, NULL));
        size_t k = (size_t)teeny_tensor_numel(v);
        float *h = th_malloc(k * sizeof *h);
        for (size_t j = 0; j < k; j++, at++) {
            h[j] = (float)(theta[at] + s * dir[at]);
            dot += grad[at] * ((double)h[j] - theta[at]);
        }
        TH_OK(th_ctx(), teeny_tensor_write(v, h, k));
        free(h);
    }
    return dot;
}

/* A training plan of g for loss at batch b, its inputs filled at random. */
static teeny_plan *rg_plan(th_rng *r, const rg_graph *rg, teeny_node loss, int64_t b)
{
    teeny_ctx *ctx = th_ctx();
    teeny_plan *p = NULL;
    teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
    pp.batch = b;
    pp.training = 1;
    pp.loss = loss;
    pp.reuse_memory = th_int(r, 0, 1);
    TH_OK(ctx, teeny_graph_compile(rg->g, &pp, &p));
    teeny_tensor *tx, *tl;
    TH_OK(ctx, teeny_plan_tensor(p, rg->x, &tx));
    TH_OK(ctx, teeny_plan_tensor(p, rg->labels, &tl));
    size_t nx = (size_t)teeny_tensor_numel(tx);
    float *xv = th_malloc(nx * sizeof *xv);
    int32_t lv[4];
    th_fill_normal(r, xv, nx, 0, 1);
    for (int64_t i = 0; i < b; i++)
        lv[i] = th_int(r, 0, 2);
    TH_OK(ctx, teeny_tensor_write(tx, xv, nx));
    TH_OK(ctx, teeny_tensor_write_i32(tl, lv, (size_t)b));
    free(xv);
    return p;
}

/* Each graph has two plans over its shared parameters, one per loss (batch
 * 2 for the one checked, 3 for the other). The other plan's backward runs
 * first, so its gradients sit in every parameter it reaches; then the
 * checked plan's backward must overwrite every gradient: exactly zero for
 * each parameter its loss does not reach (the other head's, a dead
 * branch's), and the central differences of its loss for the rest. */
START_TEST(test_alias_random_graphs)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(2024 + (uint64_t)_i);
    for (int gi = 0; gi < RG_PER_LOOP; gi++) {
        rg_graph rg;
        char what[96];
        int c = gi % 2; /* the loss checked */
        snprintf(what, sizeof what, "random graph %d (loop %d, seed %d), loss %c", gi, _i, 2024 + _i, "ab"[c]);
        rg_build(&r, &rg);
        teeny_graph *g = rg.g;
        teeny_plan *p = rg_plan(&r, &rg, rg.loss[c], 2), *other = rg_plan(&r, &rg, rg.loss[1 - c], 3);
        TH_OK(ctx, teeny_plan_forward(other));
        TH_OK(ctx, teeny_plan_backward(other));
        TH_OK(ctx, teeny_plan_forward(p));
        TH_OK(ctx, teeny_plan_backward(p));
        float l0;
        size_t n;
        TH_OK(ctx, teeny_plan_read_loss(p, &l0));
        double *theta = rg_params(g, 0, &n), *grad = rg_params(g, 1, &n);
        size_t at = 0;
        for (int i = 0; i < teeny_graph_param_count(g); i++) {
            teeny_tensor *v;
            TH_OK(ctx, teeny_graph_param(g, i, NULL, &v, NULL));
            size_t len = (size_t)teeny_tensor_numel(v);
            if (!(rg.reach[c] >> i & 1))
                for (size_t e = 0; e < len; e++)
                    ck_assert_msg(grad[at + e] == 0, "%s: parameter %d does not reach the loss; its gradient[%zu] "
                                  "is %g, not 0 (%s)", what, i, e, grad[at + e],
                                  rg.reach[1 - c] >> i & 1 ? "the other plan's" : "a dead branch");
            at += len;
        }
        double gn = 0;
        for (size_t i = 0; i < n; i++)
            gn += grad[i] * grad[i];
        gn = sqrt(gn);
        ck_assert_msg(isfinite(gn) && gn > 0, "%s: gradient norm %g", what, gn);
        /* direction: the analytic gradient plus an equal-sized random part,
         * so both a scaled and a misdirected gradient show; step and
         * Richardson extrapolation as in test_graph.c's gradcheck */
        double *dir = th_malloc(n * sizeof *dir), dn = 0;
        for (size_t i = 0; i < n; i++) {
            dir[i] = grad[i] / gn + th_normal(&r) / sqrt((double)n);
            dn += dir[i] * dir[i];
        }
        dn = sqrt(dn);
        for (size_t i = 0; i < n; i++)
            dir[i] /= dn;
        double t = 2e-3 * (fabs(l0) > 0.1 ? fabs(l0) : 0.1) / gn, est[2], ana[2];
        for (int h = 0; h < 2; h++) {
            double s = h ? t / 2 : t, lp, lm, dp, dm;
            float l;
            dp = rg_set(g, theta, dir, s, grad);
            TH_OK(ctx, teeny_plan_forward(p));
            TH_OK(ctx, teeny_plan_read_loss(p, &l));
            lp = l;
            dm = rg_set(g, theta, dir, -s, grad);
            TH_OK(ctx, teeny_plan_forward(p));
            TH_OK(ctx, teeny_plan_read_loss(p, &l));
            lm = l;
            est[h] = (lp - lm) / (2 * s);
            ana[h] = (dp - dm) / (2 * s);
        }
        double fd = (4 * est[1] - est[0]) / 3, an = (4 * ana[1] - ana[0]) / 3;
        ck_assert_msg(fabs(fd - an) <= 2e-3 * gn, "%s: finite difference %.9g vs analytic %.9g (|g| %.3g)", what, fd,
                      an, gn);
        free(theta);
        free(grad);
        free(dir);
        teeny_plan_destroy(p);
        teeny_plan_destroy(other);
        teeny_graph_destroy(g);
    }
}
END_TEST

Suite *suite_alias(void)
{
    Suite *s = suite_create("alias");
    TCase *eager = tcase_create("eager");
    TCase *graphs = tcase_create("graphs");
    tcase_add_loop_test(eager, test_alias_eager_ops, 0, N_OPS);
    tcase_add_loop_test(graphs, test_alias_random_graphs, 0, 200 / RG_PER_LOOP);
    suite_add_tcase(s, eager);
    suite_add_tcase(s, graphs);
    return s;
}
