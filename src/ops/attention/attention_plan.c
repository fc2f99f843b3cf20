/*
 * attention_plan.c -- the attention kernels' tiles and build options
 * (cl/attention.cl's -D parameters), checked against the device before
 * anything is enqueued; attention.c launches them.
 *
 * fp32 kernels: the padded head dims ATT_DQ, ATT_DV (powers of two >= 32:
 * one program per bucket), and per kernel a TR x TC thread grid, RM rows
 * and SC columns per thread. They come from plan_make: TC from the head
 * dims (each thread's accumulator slice is whole float4 chunks, at most
 * ATT_MAXT of them), TR from the device profile's thread count
 * (ctx->tune.attention, src/tune/profiles.def: 128) capped by the device's
 * max work-group size, RM and the column tile from the profile (GPU rows
 * 4 x 32, CPU rows 2 x 16), then the column tile, TR and RM shrink until
 * the tiles fit the device's local memory (at most 48 KiB, the portable
 * minimum of current GPUs). TEENY_ATTN_NT, TEENY_ATTN_RM, TEENY_ATTN_BN
 * and TEENY_ATTN_FIT override the profile's starting values (read by
 * src/tune/tune.c at context creation); a thread count below the thread
 * columns the head dims need is raised to them. The CPU variants take
 * ATT_CR rows per work-item (the profile's lanes). ATT_EXT (a bit set: 1
 * causal, 2 additive mask, 4 softcap) builds the masked kernels; a problem
 * without any of them builds none of that code, so the unmasked kernels
 * are the same programs with or without masks.
 *
 * tf32 kernels (teeny_ctx_set_tf32): TEENY_TF32=1 and, per pass, warps
 * (16 rows each) and a column tile (TF_W, TF_BN; TK_W, TK_BC; TQ_W,
 * TQ_BN), from the profile's attention_tf32 row (warps 0: none; its
 * forward's own fw_warps, fw_cols and, under 3xTF32, x3_fw_cols; the
 * environment's TEENY_ATTN_TF32_W and _BN override every pass's), the
 * column tile then the warps halved until the pass fits the same local
 * memory cap. Their program holds no fp32 tiled kernel. A test hook
 * (ATTENTION_TF32_EMULATE) builds them with
 * -DTEENY_TF32_EMULATE=1 on any device: the mma and shuffles in OpenCL C.
 * fp32 calls (tf32 off) take the same kernels with -DTEENY_TF32_X3=1
 * where the profile's attention_tf32 row says fp32_x3 (NVIDIA) and the
 * probe passes: nothing rounded as it is staged, each product's operands
 * split into tf32 hi and lo parts and summed as lo hi + hi lo + hi hi
 * (3xTF32, the error of fp32's own FMAs), with the tf32 kernels' tiles
 * but the forward's column tile (x3_fw_cols). ATT_PF: the passes whose
 * next tile's global loads are issued before the current tile's work
 * (the row's prefetch, x3_prefetch, or small_prefetch at head dims up to
 * small_dim; TEENY_ATTN_TF32_PF), which the
 * kernels take where the loads are float4s (ATT_VEC 1).
 */
#include <stdio.h>

#include "attention_internal.h"

#define ATT_LDS_CAP (48 * 1024)
static int bucket(int d)
{
    int b = 32;
    while (b < d)
        b *= 2;
    return b;
}

/* Local memory (bytes) of each kernel for a tile; mirrors FW_LDS, KV_LDS,
 * QG_LDS in cl/attention_fwd.cl and cl/attention_bwd.cl. */
static size_t lds_fw(const att_plan *p, att_tile t)
{
    size_t qs = (size_t)p->dq + 4, vs = (size_t)p->dv + 4, bm = (size_t)t.tr * t.rm, bn = (size_t)t.tc * t.sc;
    size_t a = bm * qs + bn * qs + bn * vs + bm * (bn + 4), b = bm * vs;
    return 4 * ((bm * t.tc + (a > b ? a : b) + 3) / 4 * 4);
}

static size_t lds_kv(const att_plan *p, att_tile t)
{
    size_t qs = (size_t)p->dq + 4, vs = (size_t)p->dv + 4, br = (size_t)t.tr * t.rm, bc = (size_t)t.tc * t.sc;
    return 4 * ((br * qs + br * vs + bc * qs + bc * vs + 3 * bc + 2 * br * (bc + 4) + 3) / 4 * 4);
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
    int n;
    if (p->tc)
        n = snprintf(p->options, sizeof p->options,
                     "-DATT_CR=%d -DATT_DQ=%d -DATT_DV=%d -DTEENY_TF32=1 -DTF_W=%d -DTF_BN=%d -DTK_W=%d -DTK_BC=%d "
                     "-DTQ_W=%d -DTQ_BN=%d",
                     p->cr, p->dq, p->dv, p->fw.tr, 8 * p->fw.sc, p->kv.tr, 8 * p->kv.sc, p->qg.tr, 8 * p->qg.sc);
    else
        n = snprintf(p->options, sizeof p->options,
                     "-DATT_CR=%d -DATT_DQ=%d -DATT_DV=%d -DFW_TR=%d -DFW_RM=%d -DFW_TC=%d -DFW_SC=%d -DKV_TR=%d "
                     "-DKV_RM=%d -DKV_TC=%d -DKV_SC=%d -DQG_TR=%d -DQG_RM=%d -DQG_TC=%d -DQG_SC=%d",
                     p->cr, p->dq, p->dv, p->fw.tr, p->fw.rm, p->fw.tc, p->fw.sc, p->kv.tr, p->kv.rm, p->kv.tc,
                     p->kv.sc, p->qg.tr, p->qg.rm, p->qg.tc, p->qg.sc);
    if (p->tc && p->emulate && n > 0 && (size_t)n < sizeof p->options)
        n += snprintf(p->options + n, sizeof p->options - (size_t)n, " -DTEENY_TF32_EMULATE=1");
    if (p->tc && p->x3 && n > 0 && (size_t)n < sizeof p->options)
        n += snprintf(p->options + n, sizeof p->options - (size_t)n, " -DTEENY_TF32_X3=1");
    if (p->tc && p->pf > 0 && n > 0 && (size_t)n < sizeof p->options)
        n += snprintf(p->options + n, sizeof p->options - (size_t)n, " -DATT_PF=%d", p->pf);
    if (p->tc && p->fast_exp && n > 0 && (size_t)n < sizeof p->options)
        n += snprintf(p->options + n, sizeof p->options - (size_t)n, " -DATT_EXP=%d", p->fast_exp);
    if (p->ext && n > 0 && (size_t)n < sizeof p->options) /* the unmasked programs keep their options */
        n += snprintf(p->options + n, sizeof p->options - (size_t)n, " -DATT_EXT=%d", p->ext);
    if (p->layout && n > 0 && (size_t)n < sizeof p->options)
        n += snprintf(p->options + n, sizeof p->options - (size_t)n, " -DATT_LAYOUT=%d", p->layout);
    /* column chunks need every tile's rows in whole chunks (the tf32 tiles' always are) */
    int rows4 = p->tc || (p->fw.tr * p->fw.rm % 4 == 0 && p->kv.tr * p->kv.rm % 4 == 0 && p->qg.tr * p->qg.rm % 4 == 0);
    if (p->vec && (p->vec == 1 || rows4) && n > 0 && (size_t)n < sizeof p->options)
        snprintf(p->options + n, sizeof p->options - (size_t)n, " -DATT_VEC=%d", p->vec);
}

/* ATT_LAYOUT for the tiled kernels (cl/attention.cl att_load_as): 2 when
 * every matrix of the problem is column-major (sn == 1, sd != 1: PSA's
 * NCHW views), 1 when none is, 0 (decided per matrix as it is loaded)
 * when they mix. Either walk is correct for any strides; the layout only
 * picks the one whose neighbouring work-items read neighbouring
 * addresses, and a constant lets the compiler drop the other (the run-time
 * choice cost PSA's forward and backward 9% on the H200, 2026-12-01).
 * Row-major calls keep the run-time walk in the fp32 kernels: there the
 * constant made the backward 8% slower on the H200 (2026-12-02, BH 64,
 * N 1024, D 64: 3.53 -> 3.83 ms, twice), while the tf32 kernels' forward
 * gained 25% (0.53 -> 0.40 ms). */
/* The test hook ATTENTION_LAYOUT: 0, 1 or 2, else -1 (none). */
static int forced_layout(const teeny_ctx *ctx)
{
    int64_t layout = ctx->hooks.attention_layout;
    return layout >= 0 && layout <= 2 ? (int)layout : -1;
}

static int problem_layout(const teeny_ctx *ctx, const teeny__attn_problem *p)
{
    if (forced_layout(ctx) >= 0)
        return forced_layout(ctx);
    const teeny__attn_mat *m[8] = {&p->q, &p->k, &p->v, &p->o, &p->d_o, &p->dq, &p->dk, &p->dv_out};
    int cols = 0, rows = 0;
    for (int i = 0; i < 8; i++)
        if (m[i]->buf) {
            if (m[i]->sn == 1 && m[i]->sd != 1)
                cols++;
            else
                rows++;
        }
    return cols && rows ? 0 : cols ? 2 : 1;
}

/* ATT_VEC for the tiled kernels, so that att_load_as moves 16-byte aligned
 * float4 chunks: 1 where every matrix they load (Q, K, V and dO) has unit
 * column stride, and its offset, strides and head dim are multiples of 4
 * (the contiguous [BH, N, D] tensors of a head dim that is a multiple of
 * 4); 2 where every one has unit row stride, and its offset, strides and
 * length are multiples of 4 (PSA's NCHW views of planes of 4k pixels; the
 * options add it only where every tile's rows are whole chunks too); 0
 * otherwise, and under the test hook ATTENTION_LAYOUT, whose walks the tests
 * reach on any strides. */
static int problem_vec(const teeny_ctx *ctx, const teeny__attn_problem *p)
{
    const teeny__attn_mat *m[4] = {&p->q, &p->k, &p->v, &p->d_o};
    int rows = p->d % 4 == 0 && p->dv % 4 == 0, cols = p->n_q % 4 == 0 && p->n_k % 4 == 0;
    if (forced_layout(ctx) >= 0)
        return 0;
    for (int i = 0; i < 4; i++)
        if (m[i]->buf) {
            int aligned = ((m[i]->off | m[i]->sb | m[i]->sh) & 3) == 0;
            rows = rows && aligned && m[i]->sd == 1 && m[i]->sn % 4 == 0;
            cols = cols && aligned && m[i]->sn == 1 && m[i]->sd % 4 == 0;
        }
    return rows ? 1 : cols ? 2 : 0;
}

/* The ATT_EXT bits of a problem. */
static int problem_ext(const teeny__attn_problem *p)
{
    return (p->causal ? ATT_EXT_CAUSAL : 0) | (p->mask.buf ? ATT_EXT_MASK : 0) | (p->softcap > 0 ? ATT_EXT_SOFTCAP : 0);
}

/* The preferred tiles from the device-wide limits; plan_fit then checks
 * them against the built kernels. */
static teeny_status plan_make(teeny_ctx *ctx, int d, int dv, int ext, int layout, int vec, att_plan *p)
{
    const teeny__attention_tune *tune = &ctx->tune.attention;
    size_t budget = ctx->info.local_mem_bytes < ATT_LDS_CAP ? (size_t)ctx->info.local_mem_bytes : ATT_LDS_CAP;
    int max_wg = ctx->info.max_work_group_size > 1024 ? 1024 : (int)ctx->info.max_work_group_size;
    int nt = tune->threads;
    att_tile t;
    p->cr = tune->cpu_lanes;
    p->ext = ext;
    p->layout = layout;
    p->vec = vec;
    p->tc = p->x3 = p->emulate = 0;
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
    if (p->tc) { /* tf32: the warps, then the column tile */
        if (t->tr > 1)
            t->tr /= 2;
        else if (t->sc > 1)
            t->sc /= 2;
        else
            return 0;
        return 1;
    }
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
    att_tile *tiles[3] = {&p->fw, &p->kv, &p->qg};
    int first = backward ? 1 : 0, last = backward ? 2 : 0, shrunk = 0;
    for (;;) {
        teeny_status st = TEENY_OK;
        int i;
        for (i = first; i <= last && st == TEENY_OK; i++)
            st = teeny__kernel_fit(ctx, "attention", p->options, teeny__attn_kernel(p, i),
                                   (size_t)tiles[i]->tr * (size_t)tiles[i]->tc, 0, NULL);
        if (st == TEENY_OK && shrunk)
            teeny__clear_error(ctx);
        if (st != TEENY_ERR_UNSUPPORTED || !shrink(p, tiles[i - 1]))
            return st;
        shrunk = 1;
        plan_options(p);
    }
}

/* ---- tf32 ---- */

/* Local memory (bytes) of the tf32 kernels; mirrors TF_LDS, TK_LDS,
 * TQ_LDS in cl/attention_tf32.cl, and the emulated mma's exchange (6 words an
 * item of w warps). */
static size_t lds_max(const att_plan *p, size_t a, size_t b, int w)
{
    return 4 * (((a > b ? a : b) + 3) / 4 * 4) + (p->emulate ? (size_t)4 * 6 * 32 * (size_t)w : 0);
}

static size_t lds_tfw(const att_plan *p, att_tile t)
{
    size_t qs = (size_t)p->dq + 4, vs = (size_t)p->dv + 4, bm = 16 * (size_t)t.tr, bn = 8 * (size_t)t.sc;
    return lds_max(p, bn * qs + bn * vs, bm * (qs > vs ? qs : vs), t.tr);
}

static size_t lds_tkv(const att_plan *p, att_tile t)
{
    size_t qs = (size_t)p->dq + 4, vs = (size_t)p->dv + 4, br = 16 * (size_t)t.tr, bc = 8 * (size_t)t.sc;
    return lds_max(p, bc * qs + bc * vs + 3 * bc, br * (qs + vs), t.tr);
}

static size_t lds_tqg(const att_plan *p, att_tile t)
{
    size_t qs = (size_t)p->dq + 4, vs = (size_t)p->dv + 4, bm = 16 * (size_t)t.tr, bn = 8 * (size_t)t.sc;
    return lds_max(p, bn * qs + bn * vs, bm * (qs + vs), t.tr);
}

/* Halve t's column tile, then its warps, until lds(t) fits; 0 when even
 * one warp and 8 columns do not. */
static int tc_fit(const att_plan *p, att_tile *t, size_t (*lds)(const att_plan *, att_tile), size_t budget)
{
    while (lds(p, *t) > budget) {
        if (t->sc > 1)
            t->sc /= 2;
        else if (t->tr > 1)
            t->tr /= 2;
        else
            return 0;
    }
    return 1;
}

/* Turn p (a fp32 plan) into the tensor-core kernels' where the call may
 * take them: tf32 with teeny_ctx_set_tf32, else 3xTF32 where the profile
 * says fp32_x3; p is unchanged otherwise. */
static teeny_status tc_plan(teeny_ctx *ctx, att_plan *p, int layout)
{
    const teeny__attention_tf32_tune *tu = &ctx->tune.attention_tf32;
    size_t budget = ctx->info.local_mem_bytes < ATT_LDS_CAP ? (size_t)ctx->info.local_mem_bytes : ATT_LDS_CAP;
    int capable = 0, warps = tu->warps;
    if (!(ctx->tf32 || tu->fp32_x3 > 0) || warps <= 0 || p->dq > tu->max_dim || p->dv > tu->max_dim ||
        budget < 1024)
        return TEENY_OK;
    int emulate = (int)ctx->hooks.attention_tf32_emulate;
    teeny_status st = emulate ? TEENY_OK : teeny__tf32_capable(ctx, &capable);
    if (st != TEENY_OK || !(capable || emulate))
        return st;
    while (warps > 1 && (size_t)32 * (size_t)warps > ctx->info.max_work_group_size)
        warps /= 2;
    int fw_warps = tu->fw_warps > 0 ? tu->fw_warps : warps;
    while (fw_warps > 1 && (size_t)32 * (size_t)fw_warps > ctx->info.max_work_group_size)
        fw_warps /= 2;
    int fw_cols = !ctx->tf32 && tu->x3_fw_cols > 0 ? tu->x3_fw_cols : tu->fw_cols > 0 ? tu->fw_cols : tu->cols;
    att_plan t = *p;
    t.layout = layout;
    att_tile tile = {warps, 16, 32, tu->cols / 8 > 0 ? tu->cols / 8 : 1};
    att_tile fw = {fw_warps, 16, 32, fw_cols / 8 > 0 ? fw_cols / 8 : 1};
    t.tc = 1;
    t.emulate = emulate;
    t.x3 = !ctx->tf32;
    const int small = p->dq <= tu->small_dim && p->dv <= tu->small_dim;
    t.fast_exp = t.x3 ? 0 : tu->fast_exp;
    t.pf = small ? tu->small_prefetch : t.x3 ? tu->x3_prefetch : tu->prefetch;
    t.kv = t.qg = tile;
    t.fw = fw;
    budget -= 512; /* headroom for what the compiler adds */
    if (tc_fit(&t, &t.fw, lds_tfw, budget) && tc_fit(&t, &t.kv, lds_tkv, budget) &&
        tc_fit(&t, &t.qg, lds_tqg, budget)) {
        plan_options(&t);
        *p = t;
    }
    return TEENY_OK;
}

const char *teeny__attn_kernel(const att_plan *pl, int pass)
{
    static const char *const names[2][3] = {{"attn_fwd", "attn_bwd_dkdv", "attn_bwd_dq"},
                                            {"attn_fwd_tc", "attn_bwd_dkdv_tc", "attn_bwd_dq_tc"}};
    return names[pl->tc ? 1 : 0][pass];
}

teeny_status teeny__attn_plan(teeny_ctx *ctx, const teeny__attn_problem *p, int backward, int cpu, att_plan *pl)
{
    int layout = cpu ? 0 : problem_layout(ctx, p), fp32_layout = layout == 1 && forced_layout(ctx) < 0 ? 0 : layout;
    teeny_status st = plan_make(ctx, p->d, p->dv, problem_ext(p), fp32_layout, cpu ? 0 : problem_vec(ctx, p), pl);
    if (st == TEENY_OK && !cpu) {
        att_plan fp32 = *pl;
        if ((st = tc_plan(ctx, pl, layout)) != TEENY_OK)
            return st;
        if (pl->tc) { /* a tf32 build that takes no tile leaves the fp32 kernels */
            st = plan_fit(ctx, pl, backward);
            if (st != TEENY_ERR_UNSUPPORTED)
                return st;
            teeny__clear_error(ctx);
            *pl = fp32;
        }
    }
    return st == TEENY_OK ? plan_fit(ctx, pl, backward) : st;
}
