/*
 * ops.c -- the op table, generated from ops.def: each line becomes one entry
 * naming teeny__<fn>_infer/_forward/_backward by convention (the backward
 * slot NULL for NOGRAD ops, grad_passes set for PASS ops), plus a
 * compile-time check that the op's attrs member exists in teeny__op_attrs
 * and its slot enum in ops.h, and teeny__ops_check, the run-time check of
 * the required slots that a test runs on the table and on broken copies.
 */
#include <string.h>

#include "ops.h"

#define TEENY__OP_BWD_GRAD(fn) teeny__##fn##_backward
#define TEENY__OP_BWD_NOGRAD(fn) NULL
#define TEENY__OP_BWD_PASS(fn) teeny__##fn##_backward
#define TEENY__OP_PASSES_GRAD 0
#define TEENY__OP_PASSES_NOGRAD 0
#define TEENY__OP_PASSES_PASS 1

const teeny__op teeny__ops[TEENY__OP_COUNT] = {
#define XX(e, nm, fam, fn, attrs, grad, slots)                                               \
    [TEENY__OP_##e] = {.name = nm, .family = #fam, .infer = teeny__##fn##_infer,              \
                       .forward = teeny__##fn##_forward, .backward = TEENY__OP_BWD_##grad(fn),     \
                       .grad_passes = TEENY__OP_PASSES_##grad},
#include "ops.def"
#undef XX
};

/* A misspelt attrs column fails here, naming the line's op, and so does an
 * op without its slot enum in ops.h (tests/test_ops.c checks the enum's
 * count against the SLOTS column). */
#define XX(e, nm, fam, fn, attrs, grad, slots)                                                          \
    _Static_assert(sizeof(((teeny__op_attrs *)0)->attrs) == sizeof(teeny__##attrs##_attrs),            \
                   "ops.def: " nm ": attrs is not a teeny__op_attrs member of type teeny__<attrs>_attrs"); \
    _Static_assert(TEENY__##e##_IN_SLOTS <= TEENY__OP_MAX_TENSORS,                                     \
                   "ops.h: " nm ": more slots than teeny__op_args holds");
#include "ops.def"
#undef XX

teeny_status teeny__ops_check(teeny_ctx *ctx, const teeny__op *table, int n)
{
    if (!table || n != TEENY__OP_COUNT)
        return teeny__error(ctx, TEENY_ERR_STATE, "op table: %d entries, ops.def lists %d", table ? n : 0,
                            (int)TEENY__OP_COUNT);
    for (int i = 0; i < n; i++) {
        const teeny__op *op = &table[i];
        const char *missing = NULL;
        if (!op->name || !op->family)
            missing = !op->name ? "name" : "family";
        else if (!op->infer || !op->forward)
            missing = !op->infer ? "infer" : "forward";
        if (missing)
            return teeny__error(ctx, TEENY_ERR_STATE, "op table: entry %d (%s) has no %s", i,
                                op->name ? op->name : "unnamed", missing);
        for (int j = 0; j < i; j++)
            if (!strcmp(table[j].name, op->name))
                return teeny__error(ctx, TEENY_ERR_STATE, "op table: entries %d and %d are both %s", j, i, op->name);
    }
    return TEENY_OK;
}

const char *teeny__op_name(teeny__op_id id)
{
    return (unsigned)id < TEENY__OP_COUNT ? teeny__ops[id].name : "?";
}
