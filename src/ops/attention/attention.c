/*
 * attention.c -- scaled dot-product attention, forward and backward, in the
 * flash-attention style: O = softmax(scale * Q K^T) V without ever holding
 * the N_q x N_k matrix, the row log-sum-exp saved for the backward pass,
 * and a deterministic backward (one pass owns each key block's dK, dV,
 * another each query block's dQ; no atomics).
 *
 * Layouts: q [BH, Nq, D], k [BH, Nk, D], v [BH, Nk, Dv], o [BH, Nq, Dv],
 * lse [BH, Nq]; D <= 128, Dv <= 256 (larger: TEENY_ERR_UNSUPPORTED). The
 * kernels (cl/attention.cl) address every matrix through strides, so the
 * fused PSA path (psa.c) reuses them on the NCHW qkv tensor through
 * teeny__attn_forward_run / teeny__attn_backward_run.
 *
 * Tiles and build options: attention_plan.c (fp32 kernels, and the tf32
 * tensor-core kernels attn_*_tc with teeny_ctx_set_tf32 where the device
 * runs them).
 *
 * Files: attention.c (this one) launches the flash kernels
 * (teeny__attn_forward_run, teeny__attn_backward_run); attention_op.c
 * holds the op-table entry, its shapes and the eager API.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "attention_internal.h"

/* ---- launches ---- */

/* The launch layer's argument type (internal.h). */
typedef teeny__karg att_arg;

#define ARG(x) TEENY__KARG(x)

static int push_mat(att_arg *a, int n, const teeny__attn_mat *m)
{
    a[n++] = ARG(m->buf);
    a[n++] = ARG(m->off);
    a[n++] = ARG(m->sb);
    a[n++] = ARG(m->sh);
    a[n++] = ARG(m->sn);
    a[n++] = ARG(m->sd);
    return n;
}

/* Four matrices in a row: every pass reads four before its scalars. */
static int push_mats(att_arg *a, int n, const teeny__attn_mat *m0, const teeny__attn_mat *m1,
                     const teeny__attn_mat *m2, const teeny__attn_mat *m3)
{
    n = push_mat(a, n, m0);
    n = push_mat(a, n, m1);
    n = push_mat(a, n, m2);
    return push_mat(a, n, m3);
}

/* The problem's sizes and scale, in the order every kernel takes them. */
static int push_dims(att_arg *a, int n, const teeny__attn_problem *p)
{
    a[n++] = ARG(p->heads);
    a[n++] = ARG(p->n_q);
    a[n++] = ARG(p->n_k);
    a[n++] = ARG(p->d);
    a[n++] = ARG(p->dv);
    a[n++] = ARG(p->scale);
    return n;
}

/* The backward passes' row statistics: lse, the rows' Di and lse corrections. */
static int push_rows(att_arg *a, int n, const teeny__attn_problem *p, const cl_mem *di, const cl_mem *corr)
{
    a[n++] = ARG(p->lse);
    a[n++] = ARG(p->lse_off);
    a[n++] = ARG(*di);
    a[n++] = ARG(*corr);
    return n;
}

/* The values of cl/attention.cl's ATT_EXT_ARGS (the arguments point at
 * them until the launch): the mask (q's buffer stands in when there is
 * none: never read), its heads, the causal frontier (n_k: every key
 * visible) and the softcap. */
typedef struct {
    teeny__attn_mat mask;
    int heads, causal_off;
    float softcap;
} att_ext_args;

static void ext_args_of(const teeny__attn_problem *p, att_ext_args *e)
{
    e->mask = p->mask.buf ? p->mask : (teeny__attn_mat){p->q.buf, p->q.off, 0, 0, 0, 0};
    e->heads = p->mask_heads > 0 ? p->mask_heads : 1;
    e->causal_off = p->causal ? p->causal_off : p->n_k;
    e->softcap = p->softcap;
}

/* The ATT_EXT_ARGS after scale, when the plan builds them. */
static int push_ext(att_arg *a, int n, const att_plan *pl, const att_ext_args *e)
{
    if (!pl->ext)
        return n;
    n = push_mat(a, n, &e->mask);
    a[n++] = ARG(e->heads);
    a[n++] = ARG(e->causal_off);
    a[n++] = ARG(e->softcap);
    return n;
}

/* Get name from the plan's program, set its arguments and launch it; clamp:
 * local[0] first clamped to what the kernel allows. */
static teeny_status enqueue(teeny_ctx *ctx, const att_plan *pl, const char *name, const att_arg *a, int n,
                            cl_uint dims, const size_t *global, size_t *local, int clamp)
{
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "attention", pl->options, name, &k);
    if (st == TEENY_OK && clamp)
        local[0] = teeny__local_clamp(ctx, k, name, local[0]);
    if (st == TEENY_OK)
        st = teeny__set_arg_list(ctx, k, name, a, n);
    if (st == TEENY_OK)
        st = teeny__launch(ctx, k, name, dims, global, local);
    return st;
}

static teeny_status launch_tiled(teeny_ctx *ctx, const att_plan *pl, const char *name, const att_arg *a, int n,
                                 att_tile t, int rows, int bh)
{
    int per_group = t.tr * t.rm;
    size_t local[2] = {(size_t)t.tr * t.tc, 1};
    size_t global[2] = {(size_t)((rows + per_group - 1) / per_group) * local[0], (size_t)bh};
    return enqueue(ctx, pl, name, a, n, 2, global, local, 0);
}

/* The CPU variants (TEENY_VARIANT_CPU): one work-item per pl->cr rows of
 * one matrix, no local memory; the tiles are not used. Each item loops over
 * every key (query, in dK/dV) in blocks of ATT_CPU_KB, so where a device
 * limits the loop trips of a work-item (teeny__loop_budget) the loop is
 * split into launches of at most that many trips each. */

#define ATT_CPU_KB 8     /* ATT_KB of cl/attention_cpu.cl: keys per block */
#define ATT_SEG_FIRST 1  /* as cl/attention_bwd.cl */
#define ATT_SEG_LAST 2

typedef struct {
    int fixed_rows;      /* row vectors an item loads or stores (q, the accumulators, ...) */
    int per_block;       /* loops over a head dim per block of keys */
} att_cpu_trips;

/* An item's loop trips, counting every loop entry once more than its
 * trips (a compiler may leave that): the row loads and stores take
 * pl->cr + 1 each (fixed), and each block of keys ATT_CPU_KB + 1 per
 * element of the head dims it loops over plus four loops over its keys
 * (per_block). Measured on Mesa's llvmpipe, whose limit is 65535: the
 * forward at d 64, dv 128 fails from 288 keys (passes at 264); this
 * says from 281. Masks (ATT_EXT) add one loop over the block's keys and,
 * with an additive mask, a gather of pl->cr + 1 trips per key. */
static int64_t cpu_fixed_trips(const att_plan *pl, att_cpu_trips t)
{
    return (int64_t)t.fixed_rows * (pl->cr + 1);
}

static int64_t cpu_block_trips(const att_plan *pl, att_cpu_trips t)
{
    int64_t ext = !pl->ext ? 0 : ATT_CPU_KB + 1 + (pl->ext & ATT_EXT_MASK ? (int64_t)ATT_CPU_KB * (pl->cr + 1) : 0);
    return (int64_t)(t.per_block + 4) * (ATT_CPU_KB + 1) + 1 + ext;
}

/* The blocks of keys (queries) one launch of name may loop over, of the
 * loop_len in all: every block when the device's loop budget allows, else
 * as many as it allows, evened out over the launches. Checked before the
 * op enqueues anything. */
static teeny_status cpu_split(teeny_ctx *ctx, const att_plan *pl, const char *name, int loop_len,
                              att_cpu_trips trips, int64_t *per_launch)
{
    int64_t budget, n_blocks = (loop_len + ATT_CPU_KB - 1) / ATT_CPU_KB, launches;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK)
        return st;
    int64_t fixed = cpu_fixed_trips(pl, trips), block = cpu_block_trips(pl, trips);
    if (fixed + block > budget)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED,
                            "%s: one block of %d keys needs about %lld loop trips per work-item; %s ends a "
                            "kernel's loops after %lld", name, ATT_CPU_KB, (long long)(fixed + block),
                            ctx->info.device_name, (long long)ctx->prog.loop_limit);
    *per_launch = (budget - fixed) / block;
    if (*per_launch > n_blocks)
        *per_launch = n_blocks;
    launches = (n_blocks + *per_launch - 1) / *per_launch;
    *per_launch = (n_blocks + launches - 1) / launches;
    return TEENY_OK;
}

/* Whether this call takes the CPU variants: on TEENY_VARIANT_CPU, and on
 * any device that limits a work-item's loop trips. The portable kernels'
 * trips per item grow with the sequence and the head dims by as much as
 * the compiler leaves of their tile loops (Mesa's llvmpipe ends them from
 * about 50 keys at d 128, dv 256, with stores still to come); the CPU
 * variants split theirs exactly (cpu_split). */
static teeny_status use_cpu(teeny_ctx *ctx, int *cpu)
{
    int64_t budget;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    *cpu = ctx->tune.variant == TEENY_VARIANT_CPU || budget != INT64_MAX;
    return st;
}

/* Launch name over the loop of loop_len keys (queries), per_launch blocks
 * (cpu_split) at a time. stand_in: the forward's state argument (used
 * only when split: then workspace of 2 floats per row takes its place). */
static teeny_status launch_cpu(teeny_ctx *ctx, const att_plan *pl, const char *name, att_arg *a, int n, int rows,
                               int bh, int loop_len, int64_t per_launch, const cl_mem *stand_in)
{
    int64_t n_blocks = (loop_len + ATT_CPU_KB - 1) / ATT_CPU_KB;
    teeny_status st = TEENY_OK;
    size_t items = (size_t)bh * (size_t)((rows + pl->cr - 1) / pl->cr);
    cl_mem state = stand_in ? *stand_in : NULL;
    if (stand_in && per_launch < n_blocks &&
        (st = teeny__scratch(ctx, (size_t)2 * (size_t)bh * (size_t)rows * sizeof(float), &state)) != TEENY_OK)
        return st;
    a[n++] = ARG(bh);
    if (stand_in)
        a[n++] = ARG(state);
    int seg_begin, seg_end, seg, n_args = n + 3;
    a[n++] = ARG(seg_begin);
    a[n++] = ARG(seg_end);
    a[n++] = ARG(seg);
    for (int64_t b = 0; b < n_blocks && st == TEENY_OK; b += per_launch) {
        size_t local = teeny__cpu_local(ctx, items);
        seg_begin = (int)(b * ATT_CPU_KB);
        seg_end = b + per_launch >= n_blocks ? loop_len : (int)((b + per_launch) * ATT_CPU_KB);
        seg = (b == 0 ? ATT_SEG_FIRST : 0) | (b + per_launch >= n_blocks ? ATT_SEG_LAST : 0);
        st = enqueue(ctx, pl, name, a, n_args, 1, &items, &local, 1);
    }
    return st;
}

/* attn_bwd_prep: Di into di and each row's correction to lse into corr
 * (cl/attention_bwd.cl: rows whose lse lost log(l) walk their keys again).
 * An item's loop trips: Di's dv + 1, then the head dim's d + 1 and one
 * more per key; where the device's loop budget ends that, the keys are
 * split into launches evened out (the running max and sum in workspace of
 * 2 floats a row between them). cpu: the scores as the CPU variants take
 * them (prescale). */
static teeny_status prep_run(teeny_ctx *ctx, const teeny__attn_problem *p, const att_plan *pl, int cpu,
                             const att_ext_args *ext, cl_mem di, cl_mem corr)
{
    att_arg a[64];
    int64_t budget, fixed = (int64_t)p->dv + 4, per_key = (int64_t)p->d + 2, keys = p->n_k;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK)
        return st;
    if (fixed + per_key > budget)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED,
                            "attn_bwd_prep: one key needs about %lld loop trips per work-item; %s ends a kernel's "
                            "loops after %lld", (long long)(fixed + per_key), ctx->info.device_name,
                            (long long)ctx->prog.loop_limit);
    if (fixed + per_key * keys > budget) {
        int64_t launches = (keys + (budget - fixed) / per_key - 1) / ((budget - fixed) / per_key);
        keys = (keys + launches - 1) / launches;
    }
    cl_mem state = corr; /* a stand-in, never read or written, when not split */
    if (keys < p->n_k &&
        (st = teeny__scratch(ctx, (size_t)2 * (size_t)p->bh * (size_t)p->n_q * sizeof(float), &state)) != TEENY_OK)
        return st;
    int n = push_mats(a, 0, &p->o, &p->d_o, &p->q, &p->k);
    n = push_rows(a, n, p, &di, &corr);
    a[n++] = ARG(state);
    n = push_dims(a, n, p);
    n = push_ext(a, n, pl, ext);
    int seg_begin, seg_end, seg;
    a[n++] = ARG(cpu);
    a[n++] = ARG(seg_begin);
    a[n++] = ARG(seg_end);
    a[n++] = ARG(seg);
    for (int64_t b = 0; b < p->n_k && st == TEENY_OK; b += keys) {
        size_t local[2] = {(size_t)(ctx->work_group_size < 64 ? ctx->work_group_size : 64), 1};
        size_t global[2] = {(size_t)p->n_q, (size_t)p->bh};
        seg_begin = (int)b;
        seg_end = b + keys >= p->n_k ? p->n_k : (int)(b + keys);
        seg = (b == 0 ? ATT_SEG_FIRST : 0) | (seg_end == p->n_k ? ATT_SEG_LAST : 0);
        st = enqueue(ctx, pl, "attn_bwd_prep", a, n, 2, global, local, 1);
    }
    return st;
}

teeny_status teeny__attn_forward_run(teeny_ctx *ctx, const teeny__attn_problem *p)
{
    att_plan pl;
    att_arg a[64];
    att_ext_args ext;
    int n = 0, has_lse = p->lse != NULL;
    cl_mem lse = has_lse ? p->lse : p->o.buf; /* a stand-in the kernel never writes */
    int cpu;
    teeny_status st = use_cpu(ctx, &cpu);
    if (st == TEENY_OK)
        st = teeny__attn_plan(ctx, p, 0, cpu, &pl);
    if (st != TEENY_OK)
        return st;
    n = push_mats(a, n, &p->q, &p->k, &p->v, &p->o);
    a[n++] = ARG(lse);
    a[n++] = ARG(p->lse_off);
    a[n++] = ARG(has_lse);
    n = push_dims(a, n, p);
    ext_args_of(p, &ext);
    n = push_ext(a, n, &pl, &ext);
    if (cpu) {
        int64_t per_launch;
        att_cpu_trips t = {p->d + 2 * p->dv + 3, p->d + p->dv};
        if ((st = cpu_split(ctx, &pl, "attn_fwd_cpu", p->n_k, t, &per_launch)) != TEENY_OK)
            return st;
        return launch_cpu(ctx, &pl, "attn_fwd_cpu", a, n, p->n_q, p->bh, p->n_k, per_launch, &p->o.buf);
    }
    return launch_tiled(ctx, &pl, teeny__attn_kernel(&pl, 0), a, n, pl.fw, p->n_q, p->bh);
}

teeny_status teeny__attn_backward_run(teeny_ctx *ctx, const teeny__attn_problem *p)
{
    att_plan pl;
    att_arg a[72];
    att_ext_args ext;
    cl_mem di, corr;
    int n;
    teeny_status st;
    if (!p->dq.buf && !p->dk.buf && !p->dv_out.buf)
        return TEENY_OK;
    int cpu;
    if ((st = use_cpu(ctx, &cpu)) != TEENY_OK || (st = teeny__attn_plan(ctx, p, 1, cpu, &pl)) != TEENY_OK)
        return st;
    ext_args_of(p, &ext);
    /* the CPU variants' loop splits, before anything is enqueued */
    int64_t kv_launch = 0, q_launch = 0;
    att_cpu_trips kv_trips = {3 * (p->d + p->dv), 2 * (p->d + p->dv)};
    att_cpu_trips q_trips = {3 * p->d + p->dv + 2, 2 * p->d + p->dv};
    if (cpu && (p->dk.buf || p->dv_out.buf))
        st = cpu_split(ctx, &pl, "attn_bwd_dkdv_cpu", p->n_q, kv_trips, &kv_launch);
    if (st == TEENY_OK && cpu && p->dq.buf)
        st = cpu_split(ctx, &pl, "attn_bwd_dq_cpu", p->n_k, q_trips, &q_launch);
    if (st != TEENY_OK)
        return st;
    /* Di = rowsum(dO * O) and the rows' lse corrections, shared by both passes */
    size_t rows_bytes = (size_t)p->bh * (size_t)p->n_q * sizeof(float);
    if ((st = teeny__scratch(ctx, rows_bytes, &di)) != TEENY_OK ||
        (st = teeny__scratch(ctx, rows_bytes, &corr)) != TEENY_OK ||
        (st = prep_run(ctx, p, &pl, cpu, &ext, di, corr)) != TEENY_OK)
        return st;

    /* the four inputs both passes read, then lse, Di and the corrections */
    int n_common = push_rows(a, push_mats(a, 0, &p->q, &p->k, &p->v, &p->d_o), p, &di, &corr);

    if (p->dk.buf || p->dv_out.buf) {
        /* a missing output is replaced by the other; want says which to write */
        teeny__attn_mat dk = p->dk.buf ? p->dk : p->dv_out, dv = p->dv_out.buf ? p->dv_out : p->dk;
        int want = (p->dk.buf ? 1 : 0) | (p->dv_out.buf ? 2 : 0);
        n = push_mat(a, n_common, &dk);
        n = push_mat(a, n, &dv);
        a[n++] = ARG(want);
        n = push_dims(a, n, p);
        n = push_ext(a, n, &pl, &ext);
        st = cpu ? launch_cpu(ctx, &pl, "attn_bwd_dkdv_cpu", a, n, p->n_k, p->bh, p->n_q, kv_launch, NULL)
                              : launch_tiled(ctx, &pl, teeny__attn_kernel(&pl, 1), a, n, pl.kv, p->n_k, p->bh);
        if (st != TEENY_OK)
            return st;
    }
    if (p->dq.buf) {
        n = push_dims(a, push_mat(a, n_common, &p->dq), p);
        n = push_ext(a, n, &pl, &ext);
        st = cpu ? launch_cpu(ctx, &pl, "attn_bwd_dq_cpu", a, n, p->n_q, p->bh, p->n_k, q_launch, NULL)
                              : launch_tiled(ctx, &pl, teeny__attn_kernel(&pl, 2), a, n, pl.qg, p->n_q, p->bh);
        if (st != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}
