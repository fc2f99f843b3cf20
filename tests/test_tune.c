/*
 * test_tune.c -- the device profiles (src/tune/profiles.def) and their
 * matching: every row well formed and the last one a catch-all, the row
 * each kind of device takes, forcing a row or a variant (the hooks the
 * family suites use), and the environment's overrides, parsed strictly
 * when a context is created.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

static int pow2(long x)
{
    return x > 0 && (x & (x - 1)) == 0;
}

static int asks_nothing(const teeny__device_caps *d)
{
    return !d->vendor_id && !d->type && !d->compute_units && !d->local_mem && !d->work_group && !d->float_vector &&
           !d->cap_fma && !d->cap_subgroups && !d->cap_nvidia_ptx;
}

/* The conv2d kernels' constraints on a tile (teeny__conv_tile_check, the
 * rule TEENY_CONV_TILE is held to). */
static void check_tile(const char *row, const teeny__gemm_tile *t, int tf32)
{
    const char *why = teeny__conv_tile_check(t, tf32);
    ck_assert_msg(!why, "%s: tile %dx%dx%d, micro-tile %dx%d: %s", row, t->tm, t->tn, t->tk, t->wm, t->wn, why);
}

START_TEST(test_tune_rows)
{
    int n = teeny__tune_count();
    ck_assert_int_ge(n, 1);
    ck_assert_ptr_null(teeny__tune_row(n));
    ck_assert_ptr_null(teeny__tune_row(-1));
    ck_assert_msg(asks_nothing(&teeny__tune_row(n - 1)->device), "the last row (%s) must ask nothing",
                  teeny__tune_row(n - 1)->name);
    for (int i = 0; i < n; i++) {
        const teeny__profile *p = teeny__tune_row(i);
        const teeny__conv_tune *c = &p->conv;
        const teeny__attention_tune *a = &p->attention;
        ck_assert_msg(p->name && *p->name && teeny__tune_find(p->name) == i, "row %d: name missing or repeated", i);
        ck_assert_msg(p->variant >= 0 && p->variant < TEENY_VARIANT_COUNT, "%s: variant %d", p->name, p->variant);
        ck_assert_msg(pow2(p->work_group), "%s: work-group %d is not a power of two", p->name, p->work_group);
        ck_assert_msg(c->n_tiles >= 1 && c->n_tiles <= 6, "%s: %d conv2d tiles", p->name, c->n_tiles);
        for (int t = 0; t < c->n_tiles; t++) {
            check_tile(p->name, &c->tiles[t], 0);
            if (t > 0)
                ck_assert_msg(c->tiles[t].tm * c->tiles[t].tn <= c->tiles[t - 1].tm * c->tiles[t - 1].tn,
                              "%s: conv2d tiles not largest first", p->name);
        }
        ck_assert_msg(pow2(c->dw_wg) && (c->dwb_wg == 0 || pow2(c->dwb_wg)) && c->dw_rows >= 1 && c->dw_taps >= 1 &&
                          c->dw_mult_max >= 1 && c->waves >= 1,
                      "%s: conv2d depthwise settings", p->name);
        ck_assert_msg(c->cpu_rows == 0 || (c->cpu_wg >= 1 && (c->cpu_nv == 1 || c->cpu_nv == 2)),
                      "%s: conv2d CPU GEMM settings", p->name);
        /* a row that asks for limits asks for what its smallest tile needs */
        const teeny__gemm_tile *s = &c->tiles[c->n_tiles - 1];
        size_t wg = (size_t)(s->tm / s->wm) * (size_t)(s->tn / s->wn);
        uint64_t bytes = (uint64_t)2 * s->tk * ((s->tm + 4) + (s->tn + 4)) * sizeof(float);
        if (p->device.work_group || p->device.local_mem)
            ck_assert_msg(wg <= p->device.work_group && bytes <= p->device.local_mem,
                          "%s: asks for %zu items and %llu bytes, its smallest conv2d tile needs %zu and %llu",
                          p->name, p->device.work_group, (unsigned long long)p->device.local_mem, wg,
                          (unsigned long long)bytes);
        ck_assert_msg(a->threads >= 4 && a->threads <= 1024 && a->rows >= 1 && a->rows <= 8 && a->cols >= 4 &&
                          a->cols <= 128 && (a->rows_first == 0 || a->rows_first == 1) &&
                          (a->cpu_lanes == 8 || a->cpu_lanes == 16),
                      "%s: attention settings outside TEENY_ATTN_*'s ranges", p->name);
        ck_assert_msg(p->linear.rm >= 1 && p->linear.rn >= 1 && pow2(p->linear.tk), "%s: linear settings", p->name);
        /* linear's tf32 tile: warps of whole mma tiles (16 rows per 4 of rm), k in steps of 8 */
        const teeny__linear_tune *l32 = &p->linear_tf32;
        ck_assert_msg(l32->rm == 0 || (l32->rm % 4 == 0 && l32->rn >= 1 && l32->tk >= 8 && pow2(l32->tk)),
                      "%s: linear tf32 settings %d x %d, k %d", p->name, l32->rm, l32->rn, l32->tk);
        /* the tf32 tiles: also a warp's block of (16 wm/4) x (8 wn) mma tiles divides the tile */
        const teeny__conv_tune *t32 = &p->conv_tf32;
        ck_assert_msg(!c->tf32 && (t32->n_tiles == 0 || (t32->tf32 && t32->cpu_rows == 0)),
                      "%s: tf32 tunings (only conv_tf32, never with the CPU GEMM)", p->name);
        /* Winograd (conv2d/winograd.c): 0, or its tiles' side 2 or 4, and an fp32 path only: tf32 convolutions
         * keep the GEMMs */
        ck_assert_msg((c->wino == 0 || c->wino == 2 || c->wino == 4) && t32->wino == 0 && t32->wino_dw == 0 &&
                          c->wino_dw >= 0,
                      "%s: conv2d wino %d (weight gradient %d), tf32 wino %d (%d)", p->name, c->wino, c->wino_dw,
                      t32->wino, t32->wino_dw);
        for (int t = 0; t < t32->n_tiles; t++) {
            check_tile(p->name, &t32->tiles[t], 1);
        }
    }
}
END_TEST

/* The row each kind of device takes. */
START_TEST(test_tune_match)
{
    static const struct {
        const char *what, *row;
        teeny__device_caps caps;
    } cases[] = {
        {"H200 (NVIDIA driver)", "nvidia",
         {.vendor_id = 0x10de, .type = CL_DEVICE_TYPE_GPU, .compute_units = 132, .local_mem = 49152, .work_group = 1024,
          .float_vector = 1, .cap_fma = 1, .cap_nvidia_ptx = 1}},
        {"NVIDIA GPU with small work-groups", "generic",
         {.vendor_id = 0x10de, .type = CL_DEVICE_TYPE_GPU, .local_mem = 49152, .work_group = 128, .float_vector = 1}},
        {"AMD GPU", "generic",
         {.vendor_id = 0x1002, .type = CL_DEVICE_TYPE_GPU, .compute_units = 60, .local_mem = 65536, .work_group = 256,
          .float_vector = 1, .cap_fma = 1}},
        {"GPU with 16-item work-groups", "any",
         {.vendor_id = 0x8086, .type = CL_DEVICE_TYPE_GPU, .local_mem = 65536, .work_group = 16, .float_vector = 1}},
        {"PoCL on AVX-512", "cpu_vec16",
         {.vendor_id = 0x6c636f70, .type = CL_DEVICE_TYPE_CPU, .compute_units = 2, .local_mem = 1 << 20,
          .work_group = 4096, .float_vector = 16, .cap_fma = 1}},
        {"PoCL on AVX2", "cpu",
         {.type = CL_DEVICE_TYPE_CPU, .compute_units = 8, .local_mem = 1 << 20, .work_group = 4096,
          .float_vector = 8, .cap_fma = 1}},
        {"CPU with 32-item work-groups", "cpu",
         {.type = CL_DEVICE_TYPE_CPU, .local_mem = 1 << 20, .work_group = 32, .float_vector = 16}},
        {"accelerator", "any", {.type = CL_DEVICE_TYPE_ACCELERATOR, .local_mem = 65536, .work_group = 1024}},
        {"nothing known", "any", {0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const teeny__profile *p = teeny__tune_row(teeny__tune_match(&cases[i].caps));
        ck_assert_msg(!strcmp(p->name, cases[i].row), "%s takes %s, expected %s", cases[i].what, p->name,
                      cases[i].row);
    }
    /* the shared context took what its capabilities match, or what TEENY_TUNING names */
    teeny_ctx *ctx = th_ctx();
    const char *named = getenv("TEENY_TUNING");
    int own = named && *named ? teeny__tune_find(named) : teeny__tune_match(&ctx->caps);
    ck_assert_ptr_eq(ctx->tune.matched, teeny__tune_row(own));
}
END_TEST

/* Every row forced on this device (as the conv2d and conformance suites
 * do), its variant and work-group taken; then the device's own again. */
START_TEST(test_tune_force)
{
    teeny_ctx *ctx = th_ctx();
    int n = teeny__tune_count();
    for (int i = 0; i < n; i++) {
        const teeny__profile *p = teeny__tune_row(i);
        teeny_status st = teeny__tune_force(ctx, i);
        if (st == TEENY_OK) {
            ck_assert_ptr_eq(ctx->tune.profile, p);
            ck_assert_int_eq(ctx->tune.variant, p->variant);
            ck_assert_msg(pow2(ctx->work_group_size) && (size_t)ctx->work_group_size <= ctx->caps.work_group &&
                              ctx->work_group_size <= p->work_group,
                          "%s: work-group %d", p->name, ctx->work_group_size);
        } else {
            ck_assert_int_eq(st, TEENY_ERR_UNSUPPORTED);
            ck_assert_msg(strstr(teeny_last_error(ctx), p->name), "misfit message: %s", teeny_last_error(ctx));
            ck_assert_ptr_ne(ctx->tune.profile, p);
        }
        teeny__tune_force_variant(ctx, TEENY_VARIANT_CPU);
        ck_assert_int_eq(ctx->tune.variant, TEENY_VARIANT_CPU);
        teeny__tune_force_variant(ctx, -1);
        ck_assert_int_eq(ctx->tune.variant, ctx->tune.profile->variant);
    }
    ck_assert_int_eq(teeny__tune_force(ctx, n), TEENY_ERR_ARG);
    TH_OK(ctx, teeny__tune_force(ctx, -1));
    ck_assert_ptr_eq(ctx->tune.profile, ctx->tune.matched);
    ck_assert_int_eq(ctx->tune.variant, ctx->tune.matched->variant);
}
END_TEST

/* ---- the environment ---- */

static const char *const ENV_VARS[] = {"TEENY_TUNING",       "TEENY_ATTN_NT",      "TEENY_ATTN_RM",
                                       "TEENY_ATTN_BN",      "TEENY_ATTN_FIT",     "TEENY_ATTN_TF32_W",
                                       "TEENY_ATTN_TF32_BN", "TEENY_ATTN_TF32_X3", "TEENY_ATTN_TF32_PF",
                                       "TEENY_ATTN_TF32_EXP", "TEENY_CONV_TILE",  "TEENY_CONV_TF32_TILE",
                                       "TEENY_CONV_WINO_DW", "TEENY_CONV_WINO"};
#define N_ENV ((int)(sizeof ENV_VARS / sizeof ENV_VARS[0]))
static char *env_saved[N_ENV];

/* The run's own settings (the matrix runs with TEENY_TUNING=generic) come
 * back after each test, even a failed one (a checked fixture). */
static void env_save(void)
{
    for (int i = 0; i < N_ENV; i++) {
        const char *v = getenv(ENV_VARS[i]);
        env_saved[i] = v ? strdup(v) : NULL;
        unsetenv(ENV_VARS[i]);
    }
}

static void env_restore(void)
{
    for (int i = 0; i < N_ENV; i++) {
        if (env_saved[i])
            setenv(ENV_VARS[i], env_saved[i], 1);
        else
            unsetenv(ENV_VARS[i]);
        free(env_saved[i]);
        env_saved[i] = NULL;
    }
}

/* TEENY_ATTN_*=abc and friends: rejected when the context is created,
 * with a message naming the variable (they once became a default). */
START_TEST(test_tune_env_rejected)
{
    static const struct {
        const char *var, *value;
    } bad[] = {
        {"TEENY_ATTN_NT", "abc"},  {"TEENY_ATTN_NT", "3"},    {"TEENY_ATTN_NT", "1025"},
        {"TEENY_ATTN_NT", "64x"},  {"TEENY_ATTN_NT", " 64"},  {"TEENY_ATTN_NT", "+64"},
        {"TEENY_ATTN_NT", "-4"},   {"TEENY_ATTN_NT", "99999999999999999999"},
        {"TEENY_ATTN_RM", "abc"},  {"TEENY_ATTN_RM", "0"},    {"TEENY_ATTN_RM", "9"},
        {"TEENY_ATTN_BN", "abc"},  {"TEENY_ATTN_BN", "3"},    {"TEENY_ATTN_BN", "129"},
        {"TEENY_ATTN_FIT", "2"},   {"TEENY_ATTN_FIT", "yes"}, {"TEENY_TUNING", "nosuch"},
        {"TEENY_TUNING", "GENERIC"}, {"TEENY_TUNING", ""},  {"TEENY_ATTN_BN", ""},
        {"TEENY_ATTN_TF32_W", "0"}, {"TEENY_ATTN_TF32_W", "9"}, {"TEENY_ATTN_TF32_BN", "12"},
        {"TEENY_ATTN_TF32_BN", "136"}, {"TEENY_ATTN_TF32_BN", ""}, {"TEENY_ATTN_TF32_X3", "2"},
        {"TEENY_ATTN_TF32_X3", "on"}, {"TEENY_ATTN_TF32_PF", "4"}, {"TEENY_ATTN_TF32_PF", "-1"},
        {"TEENY_ATTN_TF32_EXP", "4"}, {"TEENY_ATTN_TF32_EXP", "yes"},
        {"TEENY_CONV_TILE", ""}, {"TEENY_CONV_TILE", "64,64,16,4"}, {"TEENY_CONV_TILE", "64,64,16,4,4,4"},
        {"TEENY_CONV_TILE", "64,64,16,4,4,"}, {"TEENY_CONV_TILE", "64, 64,16,4,4"}, {"TEENY_CONV_TILE", "0,64,16,4,4"},
        {"TEENY_CONV_TILE", "512,64,16,4,4"}, {"TEENY_CONV_TILE", "64,64,16,6,4"}, /* wm not a multiple of 4 */
        {"TEENY_CONV_TILE", "64,64,32,16,16"}, /* 16 items: fewer than tk */
        {"TEENY_CONV_TILE", "64,64,4,4,4"},    /* 256 items: the A loader needs k in steps of 8 */
        {"TEENY_CONV_TF32_TILE", "64,16,16,4,4"}, /* fits fp32 (the profiles' smallest), not a warp's 8 wn columns */
        {"TEENY_CONV_TF32_TILE", "64,32,12,8,4"},
        {"TEENY_CONV_WINO_DW", "-1"}, {"TEENY_CONV_WINO_DW", "65537"}, {"TEENY_CONV_WINO_DW", "all"},
        {"TEENY_CONV_WINO_DW", ""}, {"TEENY_CONV_WINO", "1"}, {"TEENY_CONV_WINO", "3"},
        {"TEENY_CONV_WINO", "5"}, {"TEENY_CONV_WINO", "-2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        static char sentinel;
        teeny_ctx *ctx = (teeny_ctx *)&sentinel; /* must come back NULL */
        setenv(bad[i].var, bad[i].value, 1);
        teeny_status st = teeny_ctx_create(NULL, &ctx);
        unsetenv(bad[i].var);
        ck_assert_msg(st == TEENY_ERR_ARG, "%s=\"%s\": status %s", bad[i].var, bad[i].value, teeny_status_name(st));
        ck_assert_ptr_null(ctx);
        ck_assert_msg(strstr(teeny_last_error(NULL), bad[i].var), "%s=\"%s\": message \"%s\"", bad[i].var,
                      bad[i].value, teeny_last_error(NULL));
    }
}
END_TEST

START_TEST(test_tune_env_accepted)
{
    teeny_ctx *ctx = NULL;
    setenv("TEENY_ATTN_NT", "64", 1);
    setenv("TEENY_ATTN_RM", "8", 1);
    unsetenv("TEENY_ATTN_BN");
    setenv("TEENY_ATTN_FIT", "1", 1);
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    ck_assert_int_eq(ctx->tune.attention.threads, 64);
    ck_assert_int_eq(ctx->tune.attention.rows, 8);
    ck_assert_int_eq(ctx->tune.attention.cols, ctx->tune.profile->attention.cols);
    ck_assert_int_eq(ctx->tune.attention.rows_first, 1);
    /* the overrides survive a forced row */
    TH_OK(ctx, teeny__tune_force(ctx, teeny__tune_count() - 1));
    ck_assert_int_eq(ctx->tune.attention.threads, 64);
    teeny_ctx_destroy(ctx);
    unsetenv("TEENY_ATTN_NT");
    unsetenv("TEENY_ATTN_RM");
    unsetenv("TEENY_ATTN_FIT");

    /* tf32 attention tiles: overridden where the row has them, else none */
    setenv("TEENY_ATTN_TF32_W", "2", 1);
    setenv("TEENY_ATTN_TF32_BN", "64", 1);
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    int has = ctx->tune.profile->attention_tf32.warps > 0;
    ck_assert_int_eq(ctx->tune.attention_tf32.warps, has ? 2 : 0);
    ck_assert_int_eq(ctx->tune.attention_tf32.cols, has ? 64 : ctx->tune.profile->attention_tf32.cols);
    if (has) { /* every pass's, the forward's too */
        ck_assert_int_eq(ctx->tune.attention_tf32.fw_warps, 2);
        ck_assert_int_eq(ctx->tune.attention_tf32.fw_cols, 64);
        ck_assert_int_eq(ctx->tune.attention_tf32.x3_fw_cols, 64);
    }
    for (int i = 0; i < teeny__tune_count(); i++) { /* every row, forced */
        TH_OK(ctx, teeny__tune_force(ctx, i));
        has = ctx->tune.profile->attention_tf32.warps > 0;
        ck_assert_int_eq(ctx->tune.attention_tf32.warps, has ? 2 : 0);
    }
    teeny_ctx_destroy(ctx);
    unsetenv("TEENY_ATTN_TF32_W");
    unsetenv("TEENY_ATTN_TF32_BN");

    /* fp32 attention by 3xTF32: 0 turns it off on every row; 1 leaves each row's choice */
    for (int v = 0; v < 2; v++) {
        setenv("TEENY_ATTN_TF32_X3", v ? "1" : "0", 1);
        TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
        for (int i = 0; i < teeny__tune_count(); i++) {
            TH_OK(ctx, teeny__tune_force(ctx, i));
            ck_assert_int_eq(ctx->tune.attention_tf32.fp32_x3, v ? ctx->tune.profile->attention_tf32.fp32_x3 : 0);
        }
        teeny_ctx_destroy(ctx);
    }
    unsetenv("TEENY_ATTN_TF32_X3");

    /* the prefetching passes: both arithmetics' where the row has tiles, else the row's */
    setenv("TEENY_ATTN_TF32_PF", "1", 1);
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    for (int i = -1; i < teeny__tune_count(); i++) { /* the matched row, then every row forced */
        if (i >= 0)
            TH_OK(ctx, teeny__tune_force(ctx, i));
        const teeny__attention_tf32_tune *row = &ctx->tune.profile->attention_tf32;
        has = row->warps > 0;
        ck_assert_int_eq(ctx->tune.attention_tf32.prefetch, has ? 1 : row->prefetch);
        ck_assert_int_eq(ctx->tune.attention_tf32.x3_prefetch, has ? 1 : row->x3_prefetch);
        ck_assert_int_eq(ctx->tune.attention_tf32.small_prefetch, has ? 1 : row->small_prefetch);
    }
    teeny_ctx_destroy(ctx);
    unsetenv("TEENY_ATTN_TF32_PF");

    /* the passes with approximate exponentials: where the row has tiles, else the row's */
    for (int v = 0; v < 4; v++) {
        const char *val[] = {"0", "1", "2", "3"};
        setenv("TEENY_ATTN_TF32_EXP", val[v], 1);
        TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
        for (int i = -1; i < teeny__tune_count(); i++) {
            if (i >= 0)
                TH_OK(ctx, teeny__tune_force(ctx, i));
            const teeny__attention_tf32_tune *row = &ctx->tune.profile->attention_tf32;
            has = row->warps > 0;
            ck_assert_int_eq(ctx->tune.attention_tf32.fast_exp, has ? v : row->fast_exp);
        }
        teeny_ctx_destroy(ctx);
    }
    unsetenv("TEENY_ATTN_TF32_EXP");

    /* one conv2d tile in place of each row's list; tf32 only where the row has tf32 tiles */
    setenv("TEENY_CONV_TILE", "64,32,16,8,4", 1);
    setenv("TEENY_CONV_TF32_TILE", "64,64,32,8,8", 1);
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    for (int i = -1; i < teeny__tune_count(); i++) { /* the matched row, then every row forced */
        if (i >= 0)
            TH_OK(ctx, teeny__tune_force(ctx, i));
        const teeny__conv_tune *c = &ctx->tune.conv, *c32 = &ctx->tune.conv_tf32, *row = &ctx->tune.profile->conv;
        ck_assert_int_eq(c->n_tiles, 1);
        ck_assert_int_eq(c->tiles[0].tm, 64);
        ck_assert_int_eq(c->tiles[0].tn, 32);
        ck_assert_int_eq(c->tiles[0].wn, 4);
        ck_assert_int_eq(c->dw_wg, row->dw_wg); /* the rest is the row's */
        ck_assert_int_eq(c->cpu_rows, row->cpu_rows);
        ck_assert_int_eq(c32->n_tiles, ctx->tune.profile->conv_tf32.n_tiles > 0 ? 1 : 0);
        ck_assert_int_eq(c32->tiles[0].tk, c32->n_tiles ? 32 : ctx->tune.profile->conv_tf32.tiles[0].tk);
    }
    teeny_ctx_destroy(ctx);
    unsetenv("TEENY_CONV_TILE");
    unsetenv("TEENY_CONV_TF32_TILE");

    /* the Winograd weight gradients' channel threshold and the forward's tiles, every row's fp32 tuning */
    for (int v = 0; v < 3; v++) {
        setenv(v < 2 ? "TEENY_CONV_WINO_DW" : "TEENY_CONV_WINO", v == 1 ? "64" : v == 2 ? "4" : "0", 1);
        TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
        for (int i = -1; i < teeny__tune_count(); i++) {
            if (i >= 0)
                TH_OK(ctx, teeny__tune_force(ctx, i));
            const teeny__conv_tune *row = &ctx->tune.profile->conv;
            ck_assert_int_eq(ctx->tune.conv.wino_dw, v == 2 ? row->wino_dw : v ? 64 : 0);
            ck_assert_int_eq(ctx->tune.conv.wino, v == 2 ? 4 : row->wino); /* the rest is the row's */
        }
        teeny_ctx_destroy(ctx);
        unsetenv(v < 2 ? "TEENY_CONV_WINO_DW" : "TEENY_CONV_WINO");
    }
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    ck_assert_int_eq(ctx->tune.conv.n_tiles, ctx->tune.profile->conv.n_tiles);
    ck_assert_int_eq(ctx->tune.conv.tiles[0].tm, ctx->tune.profile->conv.tiles[0].tm);
    teeny_ctx_destroy(ctx);

    setenv("TEENY_TUNING", "generic", 1);
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    ck_assert_str_eq(ctx->tune.profile->name, "generic");
    ck_assert_int_eq(ctx->tune.generic, 1);
    ck_assert_int_eq(ctx->known_compiler, 0);
    ck_assert_int_eq(ctx->tune.variant, TEENY_VARIANT_PORTABLE);
    teeny_ctx_destroy(ctx);

    setenv("TEENY_TUNING", "cpu", 1); /* any row by name; asks no limits */
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    ck_assert_str_eq(ctx->tune.profile->name, "cpu");
    ck_assert_int_eq(ctx->tune.generic, 0);
    ck_assert_int_eq(ctx->tune.variant, TEENY_VARIANT_CPU);
    teeny_ctx_destroy(ctx);
}
END_TEST

/* Issue 21 item 11: TEENY_ATTN_NT=4 TEENY_ATTN_RM=8 TEENY_ATTN_BN=128, all
 * in range, ended in "internal invariant failed (src/ops/attention.c)"
 * (now src/ops/attention/) for head dims that need more than 4 thread
 * columns; the tiles now take the columns the head dims need.
 * (test_attention_small_threads checks the values against the reference.) */
START_TEST(test_tune_env_attention_small_threads)
{
    teeny_ctx *ctx = NULL;
    setenv("TEENY_ATTN_NT", "4", 1);
    setenv("TEENY_ATTN_RM", "8", 1);
    setenv("TEENY_ATTN_BN", "128", 1);
    TH_OK(NULL, teeny_ctx_create(NULL, &ctx));
    int64_t qs[3] = {2, 9, 128}, vs[3] = {2, 9, 256}, ls[2] = {2, 9};
    teeny_tensor *q = th_tensor(ctx, 3, qs), *k = th_tensor(ctx, 3, qs), *v = th_tensor(ctx, 3, vs);
    teeny_tensor *o = th_tensor(ctx, 3, vs), *lse = th_tensor(ctx, 2, ls), *g = th_tensor(ctx, 3, vs);
    teeny_tensor *dq = th_tensor(ctx, 3, qs), *dk = th_tensor(ctx, 3, qs), *dv = th_tensor(ctx, 3, vs);
    TH_OK(ctx, teeny_tensor_fill(q, 0.25f));
    TH_OK(ctx, teeny_tensor_fill(k, -0.5f));
    TH_OK(ctx, teeny_tensor_fill(v, 2.0f));
    TH_OK(ctx, teeny_tensor_fill(g, 1.0f));
    teeny_tensor *outs[] = {o, dq, dk, dv};
    for (int i = 0; i < 4; i++)
        th_poison(outs[i]);
    TH_OK(ctx, teeny_attention_forward(ctx, q, k, v, 0.125f, o, lse));
    TH_OK(ctx, teeny_attention_backward(ctx, q, k, v, o, lse, g, 0.125f, dq, dk, dv));
    /* equal keys: uniform attention, so o = v = 2, dv = g summed over the
     * queries with weight 1/9 = 1, and dq = dk = 0 */
    static const float want[] = {2.0f, 0.0f, 0.0f, 1.0f};
    for (int t = 0; t < 4; t++) {
        float *h = th_read(outs[t]);
        int64_t n = teeny_tensor_numel(outs[t]);
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(fabsf(h[i] - want[t]) < 1e-4f, "output %d element %lld: %g, expected %g", t, (long long)i,
                          (double)h[i], (double)want[t]);
        free(h);
    }
    teeny_tensor *ts[] = {q, k, v, o, lse, g, dq, dk, dv};
    for (int i = 0; i < 9; i++)
        teeny_tensor_destroy(ts[i]);
    teeny_ctx_destroy(ctx);
}
END_TEST

/* The harness's per-test reset (th_tcase_create): the first test leaves
 * every hook set, as a test that fails halfway would; the next one, in the
 * same process when the tests do not fork, finds the context as created. */
START_TEST(test_tune_hooks_left_set)
{
    teeny_ctx *ctx = th_ctx();
    th_loop_limit(123);
    th_cpu_kernels(ctx->tune.profile->variant == TEENY_VARIANT_CPU ? 0 : 1);
    th_compute_units(3);
    TH_OK(ctx, teeny_ctx_set_tf32(ctx, 1));
    ck_assert_int_eq(ctx->prog.loop_limit, 123);
}
END_TEST

START_TEST(test_tune_hooks_reset)
{
    teeny_ctx *ctx = th_ctx();
    int64_t budget = 0;
    TH_OK(ctx, teeny__loop_budget(ctx, &budget));
    ck_assert_msg(ctx->prog.loop_limit != 123, "the loop limit a test set outlived it");
    ck_assert_int_eq(ctx->tune.variant, ctx->tune.profile->variant);
    ck_assert_int_ne(ctx->info.compute_units, 3);
    ck_assert_int_eq(ctx->tf32, 0);
}
END_TEST

Suite *suite_tune(void)
{
    Suite *s = suite_create("tune");
    TCase *tc = tcase_create("forward"), *env = tcase_create("environment"), *err = tcase_create("errors");
    tcase_add_test(tc, test_tune_rows);
    tcase_add_test(tc, test_tune_match);
    tcase_add_test(tc, test_tune_force);
    tcase_add_test(tc, test_tune_hooks_left_set);
    tcase_add_test(tc, test_tune_hooks_reset);
    tcase_add_checked_fixture(env, env_save, env_restore);
    tcase_add_test(env, test_tune_env_accepted);
    tcase_add_test(env, test_tune_env_attention_small_threads);
    tcase_add_checked_fixture(err, env_save, env_restore);
    tcase_add_test(err, test_tune_env_rejected);
    suite_add_tcase(s, tc);
    suite_add_tcase(s, env);
    suite_add_tcase(s, err);
    return s;
}
