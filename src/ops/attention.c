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
 * Tuning parameters (the -D options of each program): the padded head dims
 * ATT_DQ, ATT_DV (powers of two >= 32: one program per bucket), and per
 * kernel a TR x TC thread grid, RM rows and SC columns per thread. They come
 * from plan_make: TC from the head dims (each thread's accumulator slice is
 * whole float4 chunks, at most ATT_MAXT of them), TR from the device
 * profile's thread count (ctx->tune.attention, src/tune/profiles.def:
 * 128) capped by the device's max work-group size, RM and the column tile
 * from the profile (GPU rows 4 x 32, CPU rows 2 x 16), then the column
 * tile, TR and RM shrink until the tiles fit the device's local memory (at
 * most 48 KiB, the portable minimum of current GPUs). TEENY_ATTN_NT,
 * TEENY_ATTN_RM, TEENY_ATTN_BN and TEENY_ATTN_FIT override the profile's
 * starting values (read by src/tune/tune.c at context creation); a thread
 * count below the thread columns the head dims need is raised to them.
 * The CPU variants take ATT_CR rows per work-item (the profile's lanes).
 * ATT_EXT (a bit set: 1 causal, 2 additive mask, 4 softcap) builds the
 * masked kernels; a problem without any of them builds none of that code,
 * so the unmasked kernels are the same programs with or without masks.
 *
 * Files: attention.c (this one) plans and launches the flash kernels
 * (teeny__attn_forward_run, teeny__attn_backward_run); attention_op.c
 * holds the op-table entry, its shapes and the eager API.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "ops.h"

#define ATT_LDS_CAP (48 * 1024)
#define ATT_EXT_CAUSAL 1  /* ATT_EXT bits (cl/attention.cl) */
#define ATT_EXT_MASK 2
#define ATT_EXT_SOFTCAP 4

typedef struct {
    int tr, rm, tc, sc; /* thread grid TR x TC; RM rows, SC columns per thread */
} att_tile;

typedef struct {
    int cr;               /* rows per work-item of the CPU variants: the lanes of a float8 or float16 */
    int ext;              /* ATT_EXT: ATT_EXT_* bits, 0 without masks */
    int dq, dv;           /* padded head dims */
    att_tile fw, kv, qg;  /* attn_fwd, attn_bwd_dkdv, attn_bwd_dq */
    char options[320];
} att_plan;

static int bucket(int d)
{
    int b = 32;
    while (b < d)
        b *= 2;
    return b;
}

/* Local memory (bytes) of each kernel for a tile; mirrors FW_LDS, KV_LDS,
 * QG_LDS in cl/attention.cl. */
static size_t lds_fw(const att_plan *p, att_tile t)
{
    size_t qs = (size_t)p->dq + 4, vs = (size_t)p->dv + 4, bm = (size_t)t.tr * t.rm, bn = (size_t)t.tc * t.sc;
    size_t a = bm * qs + bn * qs + bn * vs + bm * (bn + 4), b = bm * vs;
    return 4 * ((bm * t.tc + (a > b ? a : b) + 3) / 4 * 4);
}

static size_t lds_kv(const att_plan *p, att_tile t)
{
    size_t qs = (size_t)p->dq + 4, vs = (size_t)p->dv + 4, br = (size_t)t.tr * t.rm, bc = (size_t)t.tc * t.sc;
    return 4 * ((br * qs + br * vs + bc * qs + bc * vs + 2 * bc + 2 * br * (bc + 4) + 3) / 4 * 4);
}

static size_t lds_qg(const att_plan *p, att_tile t)
{
    size_t qs = (size_t)p->dq + 4, vs = (size_t)p->dv + 4, bm = (size_t)t.tr * t.rm, bn = (size_t)t.tc * t.sc;
    return 4 * ((bm * qs + bm * vs + bn * qs + bn * vs + bm * (bn + 4) + 3) / 4 * 4);
}

/* Shrink t until lds(t) fits: the column tile down to 16 (rows_first:
 * first the thread rows down to 64 work-items, keeping the register tile),
 * then the thread rows, then the rows per thread. 0 when even the smallest
 * tile does not fit. */
static int fit(const att_plan *p, att_tile *t, size_t (*lds)(const att_plan *, att_tile), size_t budget,
               int rows_first)
{
    while (lds(p, *t) > budget) {
        if (rows_first && t->tr * t->tc > 64)
            t->tr /= 2;
        else if (t->tc * t->sc > 16 && t->sc > 1)
            t->sc /= 2;
        else if (t->tr > 1)
            t->tr /= 2;
        else if (t->rm > 1)
            t->rm /= 2;
        else if (t->sc > 1)
            t->sc /= 2;
        else
            return 0;
    }
    return 1;
}

static void plan_options(att_plan *p)
{
    int n = snprintf(p->options, sizeof p->options,
                     "-DATT_CR=%d -DATT_DQ=%d -DATT_DV=%d -DFW_TR=%d -DFW_RM=%d -DFW_TC=%d -DFW_SC=%d -DKV_TR=%d -DKV_RM=%d "
                     "-DKV_TC=%d -DKV_SC=%d -DQG_TR=%d -DQG_RM=%d -DQG_TC=%d -DQG_SC=%d",
                     p->cr, p->dq, p->dv, p->fw.tr, p->fw.rm, p->fw.tc, p->fw.sc, p->kv.tr, p->kv.rm, p->kv.tc, p->kv.sc,
                     p->qg.tr, p->qg.rm, p->qg.tc, p->qg.sc);
    if (p->ext && n > 0 && (size_t)n < sizeof p->options) /* the unmasked programs keep their options */
        snprintf(p->options + n, sizeof p->options - (size_t)n, " -DATT_EXT=%d", p->ext);
}

/* The ATT_EXT bits of a problem. */
static int problem_ext(const teeny__attn_problem *p)
{
    return (p->causal ? ATT_EXT_CAUSAL : 0) | (p->mask.buf ? ATT_EXT_MASK : 0) | (p->softcap > 0 ? ATT_EXT_SOFTCAP : 0);
}

/* The preferred tiles from the device-wide limits; plan_fit then checks
 * them against the built kernels. */
static teeny_status plan_make(teeny_ctx *ctx, int d, int dv, int ext, att_plan *p)
{
    const teeny__attention_tune *tune = &ctx->tune.attention;
    size_t budget = ctx->info.local_mem_bytes < ATT_LDS_CAP ? (size_t)ctx->info.local_mem_bytes : ATT_LDS_CAP;
    int max_wg = ctx->info.max_work_group_size > 1024 ? 1024 : (int)ctx->info.max_work_group_size;
    int nt = tune->threads;
    att_tile t;
    p->cr = tune->cpu_lanes;
    p->ext = ext;
    p->dq = bucket(d);
    p->dv = bucket(dv);
    /* at most 8 float4 chunks per thread row (ATT_MAXT): pad the narrower
     * head dim to an eighth of the wider one */
    if (p->dq < p->dv / 8)
        p->dq = p->dv / 8;
    if (p->dv < p->dq / 8)
        p->dv = p->dq / 8;
    /* whole float4 chunks of both head dims per thread, at most 8 of the
     * wider one's (so at least min_tc thread columns); 16 columns of
     * threads for the widest heads keep the accumulators in registers */
    int narrow = p->dq < p->dv ? p->dq : p->dv, wide = p->dq < p->dv ? p->dv : p->dq;
    int min_tc = wide / 32 > 1 ? wide / 32 : 1;
    t.tc = p->dq >= 128 || p->dv >= 256 ? 16 : 8;
    if (t.tc > narrow / 4)
        t.tc = narrow / 4;
    if (nt > max_wg)
        nt = max_wg;
    while (t.tc / 2 >= min_tc && t.tc > nt)
        t.tc /= 2;
    if (t.tc < 4 || t.tc > max_wg || budget < 1024)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED,
                            "attention with head dims %d, %d needs work-groups of at least %d work-items and 1 KiB "
                            "of local memory; %s has %d and %zu bytes",
                            d, dv, t.tc > 4 ? t.tc : 4, ctx->info.device_name, max_wg, budget);
    t.tr = nt / t.tc > 1 ? nt / t.tc : 1;
    t.rm = tune->rows;
    t.sc = tune->cols / t.tc < 1 ? 1 : tune->cols / t.tc > 8 ? 8 : tune->cols / t.tc;
    /* bound the accumulators per thread: rm * (chunks of dK + chunks of dV) */
    while (t.rm > 1 && t.rm * (p->dq + p->dv) / (4 * t.tc) > 24)
        t.rm /= 2;
    TEENY_ASSERT(ctx, p->dq / (4 * t.tc) <= 8 && p->dv / (4 * t.tc) <= 8 && t.rm <= 8 && t.sc <= 8);
    budget -= 512; /* headroom for what the compiler adds */
    p->fw = p->kv = p->qg = t;
    int rows_first = tune->rows_first;
    if (!fit(p, &p->fw, lds_fw, budget, rows_first) || !fit(p, &p->kv, lds_kv, budget, rows_first) ||
        !fit(p, &p->qg, lds_qg, budget, rows_first))
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED,
                            "attention with head dims %d, %d needs more local memory than %s has (%llu bytes)", d,
                            dv, ctx->info.device_name, (unsigned long long)ctx->info.local_mem_bytes);
    plan_options(p);
    return TEENY_OK;
}

/* One step smaller for a tile its built kernel refused: half the thread
 * rows, then the rows per thread, then the score columns per thread, then
 * the thread columns while every head dim still spans at most ATT_MAXT
 * float4 chunks per thread; 0 when it is the smallest. */
static int shrink(const att_plan *p, att_tile *t)
{
    if (t->tr > 1)
        t->tr /= 2;
    else if (t->rm > 1)
        t->rm /= 2;
    else if (t->sc > 1)
        t->sc /= 2;
    else if (t->tc > 4 && p->dq / (4 * (t->tc / 2)) <= 8 && p->dv / (4 * (t->tc / 2)) <= 8)
        t->tc /= 2;
    else
        return 0;
    return 1;
}

/* Check the tiles against what the built kernels allow (before anything is
 * enqueued): a kernel whose TR * TC work-items or local memory its build
 * does not take gets a smaller tile (shrink), step by step; the message of
 * the last misfit when nothing fits. */
static teeny_status plan_fit(teeny_ctx *ctx, att_plan *p, int backward)
{
    const char *names[2] = {"attn_fwd", NULL};
    att_tile *tiles[2] = {&p->fw, NULL};
    int n = 1, shrunk = 0;
    if (backward) {
        names[0] = "attn_bwd_dkdv";
        tiles[0] = &p->kv;
        names[1] = "attn_bwd_dq";
        tiles[1] = &p->qg;
        n = 2;
    }
    for (;;) {
        teeny_status st = TEENY_OK;
        int i;
        for (i = 0; i < n && st == TEENY_OK; i++)
            st = teeny__kernel_fit(ctx, "attention", p->options, names[i],
                                   (size_t)tiles[i]->tr * (size_t)tiles[i]->tc, 0, NULL);
        if (st == TEENY_OK && shrunk)
            teeny__clear_error(ctx);
        if (st != TEENY_ERR_UNSUPPORTED || !shrink(p, tiles[i - 1]))
            return st;
        shrunk = 1;
        plan_options(p);
    }
}

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

static teeny_status set_args(teeny_ctx *ctx, cl_kernel k, const char *name, const att_arg *a, int n)
{
    return teeny__set_arg_list(ctx, k, name, a, n);
}

static teeny_status launch_tiled(teeny_ctx *ctx, const att_plan *pl, const char *name, const att_arg *a, int n,
                                 att_tile t, int rows, int bh)
{
    cl_kernel k;
    int per_group = t.tr * t.rm;
    size_t local[2] = {(size_t)t.tr * t.tc, 1};
    size_t global[2] = {(size_t)((rows + per_group - 1) / per_group) * local[0], (size_t)bh};
    teeny_status st = teeny__kernel_get(ctx, "attention", pl->options, name, &k);
    if (st == TEENY_OK)
        st = set_args(ctx, k, name, a, n);
    if (st == TEENY_OK)
        st = teeny__launch(ctx, k, name, 2, global, local);
    return st;
}

/* The CPU variants (TEENY_VARIANT_CPU): one work-item per pl->cr rows of
 * one matrix, no local memory; the tiles are not used. Each item loops over
 * every key (query, in dK/dV) in blocks of ATT_CPU_KB, so where a device
 * limits the loop trips of a work-item (teeny__loop_budget) the loop is
 * split into launches of at most that many trips each. */

#define ATT_CPU_KB 8     /* ATT_KB of cl/attention.cl: keys per block */
#define ATT_SEG_FIRST 1  /* as cl/attention.cl */
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
        cl_kernel k;
        seg_begin = (int)(b * ATT_CPU_KB);
        seg_end = b + per_launch >= n_blocks ? loop_len : (int)((b + per_launch) * ATT_CPU_KB);
        seg = (b == 0 ? ATT_SEG_FIRST : 0) | (b + per_launch >= n_blocks ? ATT_SEG_LAST : 0);
        st = teeny__kernel_get(ctx, "attention", pl->options, name, &k);
        if (st == TEENY_OK)
            st = set_args(ctx, k, name, a, n_args);
        if (st == TEENY_OK) {
            size_t local = teeny__local_clamp(ctx, k, name, teeny__cpu_local(ctx, items));
            st = teeny__launch(ctx, k, name, 1, &items, &local);
        }
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
    teeny_status st = plan_make(ctx, p->d, p->dv, problem_ext(p), &pl);
    if (st == TEENY_OK)
        st = plan_fit(ctx, &pl, 0);
    if (st != TEENY_OK)
        return st;
    n = push_mat(a, n, &p->q);
    n = push_mat(a, n, &p->k);
    n = push_mat(a, n, &p->v);
    n = push_mat(a, n, &p->o);
    a[n++] = ARG(lse);
    a[n++] = ARG(p->lse_off);
    a[n++] = ARG(has_lse);
    a[n++] = ARG(p->heads);
    a[n++] = ARG(p->n_q);
    a[n++] = ARG(p->n_k);
    a[n++] = ARG(p->d);
    a[n++] = ARG(p->dv);
    a[n++] = ARG(p->scale);
    ext_args_of(p, &ext);
    n = push_ext(a, n, &pl, &ext);
    int cpu;
    if ((st = use_cpu(ctx, &cpu)) != TEENY_OK)
        return st;
    if (cpu) {
        int64_t per_launch;
        att_cpu_trips t = {p->d + 2 * p->dv + 3, p->d + p->dv};
        if ((st = cpu_split(ctx, &pl, "attn_fwd_cpu", p->n_k, t, &per_launch)) != TEENY_OK)
            return st;
        return launch_cpu(ctx, &pl, "attn_fwd_cpu", a, n, p->n_q, p->bh, p->n_k, per_launch, &p->o.buf);
    }
    return launch_tiled(ctx, &pl, "attn_fwd", a, n, pl.fw, p->n_q, p->bh);
}

teeny_status teeny__attn_backward_run(teeny_ctx *ctx, const teeny__attn_problem *p)
{
    att_plan pl;
    att_arg a[72];
    att_ext_args ext;
    cl_mem di;
    cl_kernel k;
    int n;
    teeny_status st;
    if (!p->dq.buf && !p->dk.buf && !p->dv_out.buf)
        return TEENY_OK;
    if ((st = plan_make(ctx, p->d, p->dv, problem_ext(p), &pl)) != TEENY_OK ||
        (st = plan_fit(ctx, &pl, 1)) != TEENY_OK)
        return st;
    ext_args_of(p, &ext);
    /* the CPU variants' loop splits, before anything is enqueued */
    int64_t kv_launch = 0, q_launch = 0;
    att_cpu_trips kv_trips = {3 * (p->d + p->dv), 2 * (p->d + p->dv)};
    att_cpu_trips q_trips = {3 * p->d + p->dv + 2, 2 * p->d + p->dv};
    int cpu;
    if ((st = use_cpu(ctx, &cpu)) != TEENY_OK)
        return st;
    if (cpu && (p->dk.buf || p->dv_out.buf))
        st = cpu_split(ctx, &pl, "attn_bwd_dkdv_cpu", p->n_q, kv_trips, &kv_launch);
    if (st == TEENY_OK && cpu && p->dq.buf)
        st = cpu_split(ctx, &pl, "attn_bwd_dq_cpu", p->n_k, q_trips, &q_launch);
    if (st != TEENY_OK)
        return st;
    /* Di = rowsum(dO * O), shared by both passes */
    if ((st = teeny__scratch(ctx, (size_t)p->bh * (size_t)p->n_q * sizeof(float), &di)) != TEENY_OK)
        return st;
    n = push_mat(a, 0, &p->o);
    n = push_mat(a, n, &p->d_o);
    a[n++] = ARG(di);
    a[n++] = ARG(p->heads);
    a[n++] = ARG(p->n_q);
    a[n++] = ARG(p->dv);
    {
        size_t local[2] = {(size_t)(ctx->work_group_size < 64 ? ctx->work_group_size : 64), 1};
        size_t global[2] = {(size_t)p->n_q, (size_t)p->bh};
        st = teeny__kernel_get(ctx, "attention", pl.options, "attn_bwd_prep", &k);
        if (st == TEENY_OK)
            local[0] = teeny__local_clamp(ctx, k, "attn_bwd_prep", local[0]);
        if (st == TEENY_OK)
            st = set_args(ctx, k, "attn_bwd_prep", a, n);
        if (st == TEENY_OK)
            st = teeny__launch(ctx, k, "attn_bwd_prep", 2, global, local);
        if (st != TEENY_OK)
            return st;
    }

    /* the four inputs both passes read, then lse and Di */
    int n_common;
    n = push_mat(a, 0, &p->q);
    n = push_mat(a, n, &p->k);
    n = push_mat(a, n, &p->v);
    n = push_mat(a, n, &p->d_o);
    a[n++] = ARG(p->lse);
    a[n++] = ARG(p->lse_off);
    a[n++] = ARG(di);
    n_common = n;

    if (p->dk.buf || p->dv_out.buf) {
        /* a missing output is replaced by the other; want says which to write */
        teeny__attn_mat dk = p->dk.buf ? p->dk : p->dv_out, dv = p->dv_out.buf ? p->dv_out : p->dk;
        int want = (p->dk.buf ? 1 : 0) | (p->dv_out.buf ? 2 : 0);
        n = push_mat(a, n_common, &dk);
        n = push_mat(a, n, &dv);
        a[n++] = ARG(want);
        a[n++] = ARG(p->heads);
        a[n++] = ARG(p->n_q);
        a[n++] = ARG(p->n_k);
        a[n++] = ARG(p->d);
        a[n++] = ARG(p->dv);
        a[n++] = ARG(p->scale);
        n = push_ext(a, n, &pl, &ext);
        st = cpu ? launch_cpu(ctx, &pl, "attn_bwd_dkdv_cpu", a, n, p->n_k, p->bh, p->n_q, kv_launch, NULL)
                              : launch_tiled(ctx, &pl, "attn_bwd_dkdv", a, n, pl.kv, p->n_k, p->bh);
        if (st != TEENY_OK)
            return st;
    }
    if (p->dq.buf) {
        n = push_mat(a, n_common, &p->dq);
        a[n++] = ARG(p->heads);
        a[n++] = ARG(p->n_q);
        a[n++] = ARG(p->n_k);
        a[n++] = ARG(p->d);
        a[n++] = ARG(p->dv);
        a[n++] = ARG(p->scale);
        n = push_ext(a, n, &pl, &ext);
        st = cpu ? launch_cpu(ctx, &pl, "attn_bwd_dq_cpu", a, n, p->n_q, p->bh, p->n_k, q_launch, NULL)
                              : launch_tiled(ctx, &pl, "attn_bwd_dq", a, n, pl.qg, p->n_q, p->bh);
        if (st != TEENY_OK)
            return st;
    }
    return TEENY_OK;
}
