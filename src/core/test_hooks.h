/*
 * test_hooks.h -- the test hooks, the library's one test-only interface:
 * switches on the context (ctx->hooks) that force a path the device and
 * the problem would not otherwise take, so that the tests reach every
 * path on any device. test_hooks.def lists them, each with what it forces
 * and the file that reads it. A new context has every hook off; only the
 * tests set them, through teeny__test_hook_set (test_hooks.c), and
 * tests/harness.c turns them all off after each test. Nothing here is
 * global: two contexts' hooks are apart, and a context's are its thread's
 * like the rest of it.
 */
#ifndef TEENY_TEST_HOOKS_H
#define TEENY_TEST_HOOKS_H

#include <stdint.h>

#include "teenycl.h"

typedef enum {
#define XX(id, field, off) TEENY__HOOK_##id,
#include "test_hooks.def"
#undef XX
    TEENY__HOOK_COUNT
} teeny__test_hook_id;

/* ctx->hooks: one member per line of test_hooks.def. */
typedef struct {
#define XX(id, field, off) int64_t field;
#include "test_hooks.def"
#undef XX
} teeny__test_hooks;

/* Set one hook (an id past the list is ignored). */
void teeny__test_hook_set(teeny_ctx *ctx, teeny__test_hook_id id, int64_t value);
/* One hook's value (0 for an id past the list). */
int64_t teeny__test_hook(const teeny_ctx *ctx, teeny__test_hook_id id);
/* Every hook off (the values of test_hooks.def's off column). */
void teeny__test_hooks_off(teeny_ctx *ctx);

#endif
