/*
 * test_ops.c -- the op table generated from src/ops/ops.def: every required
 * slot set and names matching the list (teeny__ops_check on the real
 * table), and the check failing, naming the op and slot, on broken copies.
 * No device needed: errors go to the thread's context-less error.
 */
#include <string.h>

#include "harness.h"
#include "ops/ops.h"

static const char *const def_names[] = {
#define XX(e, name, family, fn, attrs, grad, slots) name,
#include "ops/ops.def"
#undef XX
};
#define HAS_BWD_GRAD 1
#define HAS_BWD_NOGRAD 0
#define HAS_BWD_PASS 1
static const int def_grad[] = {
#define XX(e, name, family, fn, attrs, grad, slots) HAS_BWD_##grad,
#include "ops/ops.def"
#undef XX
};
#define PASSES_GRAD 0
#define PASSES_NOGRAD 0
#define PASSES_PASS 1
static const int def_passes[] = {
#define XX(e, name, family, fn, attrs, grad, slots) PASSES_##grad,
#include "ops/ops.def"
#undef XX
};
/* Each op's slot enum (ops.h) ends with TEENY__<OP>_IN_SLOTS: the backward's
 * `in` holds inputs, params, states, the value, saved tensors and dvalue. */
static const int def_in_slots[] = {
#define XX(e, name, family, fn, attrs, grad, slots) TEENY__##e##_IN_SLOTS,
#include "ops/ops.def"
#undef XX
};

START_TEST(test_ops_table)
{
    ck_assert_int_eq((int)(sizeof def_names / sizeof def_names[0]), TEENY__OP_COUNT);
    TH_OK(NULL, teeny__ops_check(NULL, teeny__ops, TEENY__OP_COUNT));
    for (int i = 0; i < TEENY__OP_COUNT; i++) {
        ck_assert_str_eq(teeny__ops[i].name, def_names[i]);
        ck_assert_str_eq(teeny__op_name((teeny__op_id)i), def_names[i]);
        ck_assert_msg((teeny__ops[i].backward != NULL) == def_grad[i], "%s: backward slot disagrees with ops.def",
                      def_names[i]);
        teeny__op_slots sl = teeny__op_slots_of((teeny__op_id)i);
        /* a PASS op hands dy to its inputs: it has no parameters to take a gradient of */
        ck_assert_msg(teeny__ops[i].grad_passes == def_passes[i] && (!def_passes[i] || sl.param == 0),
                      "%s: grad_passes %d, ops.def's PASS %d, %d params", def_names[i], teeny__ops[i].grad_passes,
                      def_passes[i], sl.param);
        int want = def_grad[i] ? teeny__slot_dvalue(sl) + 1 : teeny__slot_value(sl);
        ck_assert_msg(def_in_slots[i] == want, "%s: its slot enum has %d in-slots; ops.def's SLOTS give %d",
                      def_names[i], def_in_slots[i], want);
        ck_assert(sl.in >= 1 && sl.in <= TEENY__OP_MAX_SLOTS && sl.param <= TEENY__OP_MAX_SLOTS &&
                  sl.state <= TEENY__OP_MAX_SLOTS && sl.saved <= TEENY__OP_MAX_SLOTS);
    }
    ck_assert_str_eq(teeny__ops[TEENY__OP_CONV2D].family, "conv2d");
    ck_assert_str_eq(teeny__ops[TEENY__OP_PSA_PACK_QKV].family, "attention");
    ck_assert(teeny__ops[TEENY__OP_PSA_PACK_QKV].forward == teeny__psa_pack_forward);
    ck_assert_str_eq(teeny__op_name(TEENY__OP_COUNT), "?");
}
END_TEST

/* Break one slot of a copy; the check must fail and name op and slot. */
static void expect_broken(const teeny__op *copy, int n, const char *op, const char *slot)
{
    TH_STATUS(NULL, TEENY_ERR_STATE, teeny__ops_check(NULL, copy, n));
    const char *msg = teeny_last_error(NULL);
    ck_assert_msg(strstr(msg, op) != NULL && strstr(msg, slot) != NULL, "want %s and %s in: %s", op, slot, msg);
}

START_TEST(test_ops_check_fails)
{
    teeny__op copy[TEENY__OP_COUNT];
    memcpy(copy, teeny__ops, sizeof copy);
    copy[TEENY__OP_CONV2D].infer = NULL;
    expect_broken(copy, TEENY__OP_COUNT, "conv2d", "infer");
    memcpy(copy, teeny__ops, sizeof copy);
    copy[TEENY__OP_MUL].forward = NULL;
    expect_broken(copy, TEENY__OP_COUNT, "mul", "forward");
    memcpy(copy, teeny__ops, sizeof copy);
    copy[TEENY__OP_ADD].family = NULL;
    expect_broken(copy, TEENY__OP_COUNT, "add", "family");
    memcpy(copy, teeny__ops, sizeof copy);
    copy[TEENY__OP_PSA_MERGE_ATTN].name = NULL;
    expect_broken(copy, TEENY__OP_COUNT, "unnamed", "name");
    memcpy(copy, teeny__ops, sizeof copy);
    copy[TEENY__OP_LINEAR].name = "concat";
    expect_broken(copy, TEENY__OP_COUNT, "concat", "both");
    expect_broken(teeny__ops, TEENY__OP_COUNT - 1, "entries", "ops.def");
    TH_STATUS(NULL, TEENY_ERR_STATE, teeny__ops_check(NULL, NULL, TEENY__OP_COUNT));
    /* backward is optional (NOGRAD ops) */
    memcpy(copy, teeny__ops, sizeof copy);
    copy[TEENY__OP_ATTENTION].backward = NULL;
    TH_OK(NULL, teeny__ops_check(NULL, copy, TEENY__OP_COUNT));
}
END_TEST

/* The test hooks (src/core/test_hooks.def) live on the context: a new one
 * has every hook off, one context's hooks leave another's alone, setting
 * CONV_WINO starts a fresh count, and an id past the list is ignored. */
START_TEST(test_ops_test_hooks)
{
    teeny_ctx *ctx = th_ctx(), *other = NULL;
    TH_OK(NULL, teeny_ctx_create(NULL, &other));
    ck_assert_int_eq(teeny__test_hook(other, TEENY__HOOK_CONV_TILE), -1);
    ck_assert_int_eq(teeny__test_hook(other, TEENY__HOOK_ATTENTION_LAYOUT), -1);
    ck_assert_int_eq(teeny__test_hook(other, TEENY__HOOK_KERNEL_WG_CAP), 0);
    th_hook(TEENY__HOOK_KERNEL_WG_CAP, 16);
    th_hook(TEENY__HOOK_CONV_WINO_TAKEN, 3);
    ck_assert_int_eq(ctx->hooks.kernel_wg_cap, 16);
    ck_assert_int_eq(th_hook_value(TEENY__HOOK_CONV_WINO_TAKEN), 3);
    ck_assert_int_eq(teeny__test_hook(other, TEENY__HOOK_KERNEL_WG_CAP), 0);
    th_hook(TEENY__HOOK_CONV_WINO, 1);
    ck_assert_int_eq(th_hook_value(TEENY__HOOK_CONV_WINO_TAKEN), 0);
    teeny__test_hook_set(ctx, TEENY__HOOK_COUNT, 5);
    ck_assert_int_eq(teeny__test_hook(ctx, TEENY__HOOK_COUNT), 0);
    teeny__test_hooks_off(ctx);
    ck_assert_int_eq(th_hook_value(TEENY__HOOK_KERNEL_WG_CAP), 0);
    ck_assert_int_eq(th_hook_value(TEENY__HOOK_CONV_TILE), -1);
    teeny_ctx_destroy(other);
}
END_TEST

Suite *suite_ops(void)
{
    Suite *s = suite_create("ops");
    TCase *tab = tcase_create("table"), *err = tcase_create("errors");
    tcase_add_test(tab, test_ops_table);
    tcase_add_test(tab, test_ops_test_hooks);
    tcase_add_test(err, test_ops_check_fails);
    suite_add_tcase(s, tab);
    suite_add_tcase(s, err);
    return s;
}
