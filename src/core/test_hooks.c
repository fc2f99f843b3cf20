/*
 * test_hooks.c -- the test hooks' setter, reader and reset over
 * ctx->hooks, generated from test_hooks.def (test_hooks.h says what they
 * are for). The library's code reads its hook straight from ctx->hooks;
 * only the tests call these.
 */
#include "../internal.h"

void teeny__test_hook_set(teeny_ctx *ctx, teeny__test_hook_id id, int64_t value)
{
    switch (id) {
#define XX(name, field, off)                                                                                           \
    case TEENY__HOOK_##name:                                                                                           \
        ctx->hooks.field = value;                                                                                      \
        break;
#include "test_hooks.def"
#undef XX
    default:
        return;
    }
    if (id == TEENY__HOOK_CONV_WINO) { /* a fresh count, the default cap */
        ctx->hooks.conv_wino_taken = 0;
        ctx->hooks.conv_wino_cap = 0;
    }
}

int64_t teeny__test_hook(const teeny_ctx *ctx, teeny__test_hook_id id)
{
    switch (id) {
#define XX(name, field, off)                                                                                           \
    case TEENY__HOOK_##name:                                                                                           \
        return ctx->hooks.field;
#include "test_hooks.def"
#undef XX
    default:
        return 0;
    }
}

void teeny__test_hooks_off(teeny_ctx *ctx)
{
#define XX(name, field, off) ctx->hooks.field = (off);
#include "test_hooks.def"
#undef XX
}
