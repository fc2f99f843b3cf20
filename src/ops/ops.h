/*
 * ops.h -- the op table. Every op is one line in ops.def; each family's
 * src/ops/<family>.c defines the entry's functions. The eager API and the
 * graph executor reach kernels only through this table, so adding an op
 * never touches the executor.
 *
 * Arguments travel in one struct: tensors in a fixed order per op (see each
 * op's comment in its family file), integer and float attributes.
 */
#ifndef TEENY_OPS_H
#define TEENY_OPS_H

#include "../internal.h"

typedef enum {
#define XX(e, name, family) TEENY__OP_##e,
#include "ops.def"
#undef XX
    TEENY__OP_COUNT
} teeny__op_id;

#define TEENY__OP_MAX_TENSORS 12

typedef struct {
    const teeny_tensor *in[TEENY__OP_MAX_TENSORS]; /* read */
    teeny_tensor *out[TEENY__OP_MAX_TENSORS];      /* written (incl. updated state) */
    int iattr[8];
    float fattr[8];
} teeny__op_args;

typedef teeny_status (*teeny__op_fn)(teeny_ctx *ctx, const teeny__op_args *a);

typedef struct {
    const char *name;
    const char *family;
    teeny__op_fn forward;   /* required */
    teeny__op_fn backward;  /* optional: NULL when the op has no gradient */
} teeny__op;

extern const teeny__op teeny__ops[TEENY__OP_COUNT];

/* Entry points each family file defines. */
teeny_status teeny__add_forward(teeny_ctx *ctx, const teeny__op_args *a);
teeny_status teeny__activation_forward(teeny_ctx *ctx, const teeny__op_args *a);
teeny_status teeny__activation_backward(teeny_ctx *ctx, const teeny__op_args *a);
teeny_status teeny__batchnorm_forward(teeny_ctx *ctx, const teeny__op_args *a);
teeny_status teeny__batchnorm_backward(teeny_ctx *ctx, const teeny__op_args *a);

/* Run an op through the table (what the eager API does). */
static inline teeny_status teeny__op_run(teeny_ctx *ctx, teeny__op_id id, int backward, const teeny__op_args *a)
{
    teeny__op_fn fn = backward ? teeny__ops[id].backward : teeny__ops[id].forward;
    if (!fn)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "op %s has no %s pass", teeny__ops[id].name,
                            backward ? "backward" : "forward");
    return fn(ctx, a);
}

#endif
