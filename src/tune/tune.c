/*
 * tune.c -- matching a device against the profiles of profiles.def, the
 * environment's overrides, and the test hooks that force a row or a
 * kernel variant (tune.h says what each does).
 *
 * Like CLBlast's kernel database, the rows run from the most specific to
 * the most general and the first that fits wins; unlike it, a row is
 * matched on what the device reports (vendor id, type, limits, probed
 * capabilities) rather than its name, and the catch-all last row is
 * checked by the tune suite rather than assumed. Everything is decided
 * once, at context creation: device.c calls teeny__tune_init, and this
 * file calls nothing but status.c and the C library.
 *
 * Environment (read here and nowhere else in the ops):
 *   TEENY_TUNING    unset or empty: match; "generic": the row a GPU of
 *                   unknown make takes, built without compiler hints; any
 *                   other row's name: that row
 *   TEENY_ATTN_NT   attention threads per work-group, 4..1024
 *   TEENY_ATTN_RM   attention query rows per thread, 1..8
 *   TEENY_ATTN_BN   attention key-column tile, 4..128
 *   TEENY_ATTN_FIT  1: shrink thread rows before the column tile, 0: not
 *   TEENY_ATTN_TF32_W   tf32 attention warps per work-group, 1..8, every
 *                       pass (where the row has tf32 attention tiles)
 *   TEENY_ATTN_TF32_BN  tf32 attention column tile, 8..128, a multiple of
 *                       8, every pass
 *   TEENY_ATTN_TF32_X3  0: fp32 attention keeps the FMA kernels where the
 *                       row would take 3xTF32 (fp32_x3), 1: the row's choice
 *   TEENY_ATTN_TF32_PF  the tensor-core passes that prefetch their next
 *                       tile, both arithmetics and head-dim buckets: 0
 *                       none, 1 the forward, 2 the backward, 3 both (where
 *                       the row has tiles)
 *   TEENY_ATTN_TF32_EXP  the passes of tf32 calls whose softmax takes the
 *                        hardware's approximate exponentials: 0 none, 1
 *                        the forward, 2 the backward, 3 both (where the
 *                        row has tiles)
 *   TEENY_CONV_TILE       "tm,tn,tk,wm,wn": the conv2d GEMMs' one tile in
 *                         place of the row's list (for tuning runs), held
 *                         to the kernels' constraints (check_conv_tile)
 *   TEENY_CONV_TF32_TILE  the same for the tf32 GEMMs (where the row has
 *                         tf32 tiles), also held to the tf32 micro-kernel's
 *                         constraints
 *   TEENY_CONV_WINO       0, 2 or 4: the fp32 conv tuning's wino (0: no
 *                         Winograd forward or input gradients, 2:
 *                         F(2x2, 3x3), 4: F(4x4, 3x3))
 *   TEENY_CONV_WINO_DW    0..65536: the fp32 conv tuning's wino_dw (0: no
 *                         Winograd weight gradients, else the fewest
 *                         channels each way that take one)
 * A value that is not a decimal integer in range, a tile the kernels
 * cannot take, or a TEENY_TUNING that names no row, fails the context's
 * creation with TEENY_ERR_ARG.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const teeny__profile ROWS[] = {
#include "tune/profiles.def"
};
#define N_ROWS ((int)(sizeof ROWS / sizeof ROWS[0]))

int teeny__tune_count(void)
{
    return N_ROWS;
}

const teeny__profile *teeny__tune_row(int i)
{
    return i >= 0 && i < N_ROWS ? &ROWS[i] : NULL;
}

int teeny__tune_find(const char *name)
{
    for (int i = 0; i < N_ROWS; i++)
        if (!strcmp(ROWS[i].name, name))
            return i;
    return -1;
}

/* What a row cannot run without: its work-group and local memory (its
 * tiles) and the capabilities its kernels use. */
static int holds(const teeny__device_caps *need, const teeny__device_caps *have)
{
    return have->work_group >= need->work_group && have->local_mem >= need->local_mem &&
           (!need->cap_subgroups || have->cap_subgroups) && (!need->cap_nvidia_ptx || have->cap_nvidia_ptx);
}

/* holds, and the rest of what the row asks for: the device it is for. */
static int matches(const teeny__device_caps *need, const teeny__device_caps *have)
{
    return holds(need, have) && (!need->vendor_id || need->vendor_id == have->vendor_id) &&
           (!need->type || (need->type & have->type)) && have->compute_units >= need->compute_units &&
           have->float_vector >= need->float_vector && (!need->cap_fma || have->cap_fma);
}

int teeny__tune_match(const teeny__device_caps *caps)
{
    int i = 0;
    while (i < N_ROWS - 1 && !matches(&ROWS[i].device, caps))
        i++;
    return i; /* the last row asks nothing */
}

/* Why the device cannot hold row; the message goes to ctx, or while ctx
 * is being created (creating) to the thread's. */
static teeny_status misfit(const teeny_ctx *ctx, const teeny__profile *row, int creating)
{
    const teeny__device_caps *need = &row->device, *have = &ctx->caps;
    return teeny__error(creating ? NULL : ctx, TEENY_ERR_UNSUPPORTED,
                        "device profile \"%s\" needs work-groups of %zu items, %llu bytes of local memory%s%s; "
                        "%s has %zu items, %llu bytes%s%s",
                        row->name, need->work_group, (unsigned long long)need->local_mem,
                        need->cap_subgroups ? ", subgroups" : "", need->cap_nvidia_ptx ? ", inline PTX" : "",
                        ctx->info.device_name, have->work_group, (unsigned long long)have->local_mem,
                        have->cap_subgroups ? ", subgroups" : "", have->cap_nvidia_ptx ? ", inline PTX" : "");
}

/* Take row: its tunings with the environment's overrides, its variant,
 * its work-group within the device's maximum. */
static void apply(teeny_ctx *ctx, const teeny__profile *row)
{
    teeny__tune *t = &ctx->tune;
    const teeny__attention_tune *env = &t->attention_env;
    t->profile = row;
    t->variant = row->variant;
    t->attention = row->attention;
    if (env->threads >= 0)
        t->attention.threads = env->threads;
    if (env->rows >= 0)
        t->attention.rows = env->rows;
    if (env->cols >= 0)
        t->attention.cols = env->cols;
    if (env->rows_first >= 0)
        t->attention.rows_first = env->rows_first;
    t->conv = row->conv;
    if (t->conv_env.tm > 0) {
        t->conv.n_tiles = 1;
        t->conv.tiles[0] = t->conv_env;
    }
    if (t->conv_wino_env >= 0)
        t->conv.wino = t->conv_wino_env;
    if (t->conv_wino_dw_env >= 0)
        t->conv.wino_dw = t->conv_wino_dw_env;
    t->conv_tf32 = row->conv_tf32;
    if (row->conv_tf32.n_tiles > 0 && t->conv_tf32_env.tm > 0) {
        t->conv_tf32.n_tiles = 1;
        t->conv_tf32.tiles[0] = t->conv_tf32_env;
    }
    t->attention_tf32 = row->attention_tf32;
    if (row->attention_tf32.warps > 0 && t->attention_tf32_env.warps >= 0)
        t->attention_tf32.warps = t->attention_tf32.fw_warps = t->attention_tf32_env.warps;
    if (row->attention_tf32.warps > 0 && t->attention_tf32_env.cols >= 0)
        t->attention_tf32.cols = t->attention_tf32.fw_cols = t->attention_tf32.x3_fw_cols =
            t->attention_tf32_env.cols;
    if (t->attention_tf32_env.fp32_x3 == 0)
        t->attention_tf32.fp32_x3 = 0;
    if (row->attention_tf32.warps > 0 && t->attention_tf32_env.prefetch >= 0)
        t->attention_tf32.prefetch = t->attention_tf32.x3_prefetch = t->attention_tf32.small_prefetch =
            t->attention_tf32_env.prefetch;
    if (row->attention_tf32.warps > 0 && t->attention_tf32_env.fast_exp >= 0)
        t->attention_tf32.fast_exp = t->attention_tf32_env.fast_exp;
    size_t want = (size_t)row->work_group;
    while (want > ctx->caps.work_group)
        want /= 2;
    ctx->work_group_size = (int)(want ? want : 1);
}

/* The environment's number name in lo..hi into *out, left alone when
 * unset: the library's one strict parser (util.c), so an empty value, a
 * sign, a space, a suffix or a value out of range is TEENY_ERR_ARG naming
 * the variable. */
static teeny_status env_int_strict(const char *name, int lo, int hi, int *out)
{
    long long v;
    teeny_status st = teeny__env_int(NULL, name, lo, hi, *out, &v);
    if (st == TEENY_OK)
        *out = (int)v;
    return st;
}

static teeny_status read_attention_env(teeny__attention_tune *env)
{
    teeny_status st;
    env->threads = env->rows = env->cols = env->rows_first = env->cpu_lanes = -1;
    if ((st = env_int_strict("TEENY_ATTN_NT", 4, 1024, &env->threads)) != TEENY_OK ||
        (st = env_int_strict("TEENY_ATTN_RM", 1, 8, &env->rows)) != TEENY_OK ||
        (st = env_int_strict("TEENY_ATTN_BN", 4, 128, &env->cols)) != TEENY_OK)
        return st;
    return env_int_strict("TEENY_ATTN_FIT", 0, 1, &env->rows_first);
}

static teeny_status read_attention_tf32_env(teeny__attention_tf32_tune *env)
{
    teeny_status st;
    env->warps = env->cols = env->fw_warps = env->fw_cols = env->x3_fw_cols = env->max_dim = env->fp32_x3 = -1;
    env->prefetch = env->x3_prefetch = env->small_dim = env->small_prefetch = env->fast_exp = -1;
    if ((st = env_int_strict("TEENY_ATTN_TF32_W", 1, 8, &env->warps)) != TEENY_OK ||
        (st = env_int_strict("TEENY_ATTN_TF32_BN", 8, 128, &env->cols)) != TEENY_OK ||
        (st = env_int_strict("TEENY_ATTN_TF32_X3", 0, 1, &env->fp32_x3)) != TEENY_OK ||
        (st = env_int_strict("TEENY_ATTN_TF32_PF", 0, 3, &env->prefetch)) != TEENY_OK ||
        (st = env_int_strict("TEENY_ATTN_TF32_EXP", 0, 3, &env->fast_exp)) != TEENY_OK)
        return st;
    if (env->cols >= 0 && env->cols % 8)
        return teeny__error(NULL, TEENY_ERR_ARG, "TEENY_ATTN_TF32_BN=%d is not a multiple of 8", env->cols);
    return TEENY_OK;
}

const char *teeny__conv_tile_check(const teeny__gemm_tile *t, int tf32)
{
    if (t->wm % 4 || t->wn % 4 || t->tm % t->wm || t->tn % t->wn)
        return "wm and wn must be multiples of 4 dividing tm and tn";
    int wg = (t->tm / t->wm) * (t->tn / t->wn), a_tm = t->tm < 32 ? t->tm : 32, a4_tm = t->tm / 4;
    a_tm = a_tm < wg ? a_tm : wg;
    a4_tm = a4_tm < wg ? a4_tm : wg;
    if (wg % t->tk || (wg % t->tm && t->tm % wg))
        return "its work-group ((tm/wm)*(tn/wn) items) must be a multiple of tk and divide or be a multiple of tm";
    int r_tx = wg / t->tk; /* the loaders' shapes (cl/conv2d.cl: A_TK, A4_TK, B_TN, R_TX) */
    if (t->tk % (wg / a_tm) || t->tk % (wg / a4_tm) || t->tm % r_tx)
        return "its loaders need tk a multiple of the work-group over min(32, tm) and over tm/4, and tm a "
               "multiple of the work-group over tk";
    if (tf32 && (t->tm % (4 * t->wm) || t->tn % (8 * t->wn) || t->tk % 8))
        return "the tf32 micro-kernel needs tm % (4 wm) == 0, tn % (8 wn) == 0 and tk % 8 == 0";
    return NULL;
}

/* TEENY_CONV_TILE or TEENY_CONV_TF32_TILE ("tm,tn,tk,wm,wn") into *t;
 * t->tm = 0 when unset. */
static teeny_status read_conv_tile_env(const char *name, int tf32, teeny__gemm_tile *t)
{
    static const long long hi[5] = {256, 256, 64, 16, 16};
    const char *s = getenv(name), *why = NULL;
    long long v[5];
    memset(t, 0, sizeof *t);
    if (!s)
        return TEENY_OK;
    const char *p = s;
    for (int i = 0; i < 5 && !why; i++) {
        size_t len = strcspn(p, ",");
        const char *bad;
        if (!teeny__parse_int(p, len, 1, hi[i], &v[i], &bad))
            why = bad; /* sets bad on success too */
        p += len;
        if (!why && i < 4 && *p++ != ',')
            why = "has fewer than five numbers";
    }
    if (!why && *p)
        why = "has more than five numbers";
    if (why)
        return teeny__error(NULL, TEENY_ERR_ARG,
                            "%s=\"%.64s\" %s; it takes \"tm,tn,tk,wm,wn\" (tm, tn 1..256, tk 1..64, wm, wn "
                            "1..16), or unset", name, s, why);
    *t = (teeny__gemm_tile){.tm = (int)v[0], .tn = (int)v[1], .tk = (int)v[2], .wm = (int)v[3], .wn = (int)v[4]};
    if ((why = teeny__conv_tile_check(t, tf32)) != NULL) {
        memset(t, 0, sizeof *t);
        return teeny__error(NULL, TEENY_ERR_ARG, "%s=\"%.64s\": %s", name, s, why);
    }
    return TEENY_OK;
}

/* The row TEENY_TUNING names, or the first the device matches. */
static teeny_status pick_row(teeny_ctx *ctx, const teeny__profile **out)
{
    const char *name = getenv("TEENY_TUNING");
    if (name && !*name)
        return teeny__error(NULL, TEENY_ERR_ARG, "TEENY_TUNING is set but empty; unset it or name a device profile");
    if (!name) {
        *out = &ROWS[teeny__tune_match(&ctx->caps)];
        return TEENY_OK;
    }
    int i = teeny__tune_find(name);
    if (i < 0) {
        char names[256] = "";
        for (int j = 0; j < N_ROWS; j++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", j ? ", " : "", ROWS[j].name);
        return teeny__error(NULL, TEENY_ERR_ARG, "TEENY_TUNING=\"%.64s\" names no device profile; the profiles: %s",
                            name, names);
    }
    if (!holds(&ROWS[i].device, &ctx->caps))
        return misfit(ctx, &ROWS[i], 1);
    ctx->tune.generic = !strcmp(name, "generic");
    *out = &ROWS[i];
    return TEENY_OK;
}

teeny_status teeny__tune_init(teeny_ctx *ctx)
{
    const teeny__profile *row = NULL;
    teeny_status st = read_attention_env(&ctx->tune.attention_env);
    if (st == TEENY_OK)
        st = read_attention_tf32_env(&ctx->tune.attention_tf32_env);
    if (st == TEENY_OK)
        st = read_conv_tile_env("TEENY_CONV_TILE", 0, &ctx->tune.conv_env);
    if (st == TEENY_OK)
        st = read_conv_tile_env("TEENY_CONV_TF32_TILE", 1, &ctx->tune.conv_tf32_env);
    ctx->tune.conv_wino_env = ctx->tune.conv_wino_dw_env = -1;
    if (st == TEENY_OK)
        st = env_int_strict("TEENY_CONV_WINO", 0, 4, &ctx->tune.conv_wino_env);
    if (st == TEENY_OK && (ctx->tune.conv_wino_env == 1 || ctx->tune.conv_wino_env == 3))
        st = teeny__error(NULL, TEENY_ERR_ARG, "TEENY_CONV_WINO=%d: it takes 0, 2 or 4", ctx->tune.conv_wino_env);
    if (st == TEENY_OK)
        st = env_int_strict("TEENY_CONV_WINO_DW", 0, 65536, &ctx->tune.conv_wino_dw_env);
    if (st == TEENY_OK)
        st = pick_row(ctx, &row);
    if (st != TEENY_OK)
        return st;
    ctx->tune.matched = row;
    apply(ctx, row);
    return TEENY_OK;
}

teeny_status teeny__tune_force(teeny_ctx *ctx, int i)
{
    if (i < 0) {
        apply(ctx, ctx->tune.matched);
        return TEENY_OK;
    }
    if (i >= N_ROWS)
        return teeny__error(ctx, TEENY_ERR_ARG, "no device profile %d (there are %d)", i, N_ROWS);
    if (!holds(&ROWS[i].device, &ctx->caps))
        return misfit(ctx, &ROWS[i], 0);
    apply(ctx, &ROWS[i]);
    return TEENY_OK;
}

void teeny__tune_force_variant(teeny_ctx *ctx, int v)
{
    ctx->tune.variant = v >= 0 && v < TEENY_VARIANT_COUNT ? (teeny__variant)v : ctx->tune.profile->variant;
}
