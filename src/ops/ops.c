/*
 * ops.c -- the op table itself, checked against ops.def.
 */
#include "ops.h"

const teeny__op teeny__ops[TEENY__OP_COUNT] = {
    [TEENY__OP_ADD] = {.name = "add", .family = "elementwise", .infer = teeny__add_infer,
                       .forward = teeny__add_forward, .backward = teeny__add_backward},
    [TEENY__OP_ACTIVATION] = {.name = "activation", .family = "elementwise", .infer = teeny__activation_infer,
                              .forward = teeny__activation_forward, .backward = teeny__activation_backward},
    [TEENY__OP_BATCHNORM] = {.name = "batchnorm", .family = "batchnorm", .infer = teeny__batchnorm_infer,
                             .forward = teeny__batchnorm_forward, .backward = teeny__batchnorm_backward},
};

static const char *const op_names[] = {
#define XX(e, name, family) name,
#include "ops.def"
#undef XX
};
_Static_assert(sizeof op_names / sizeof op_names[0] == TEENY__OP_COUNT, "ops.def and the op table disagree");

const char *teeny__op_name(teeny__op_id id);
const char *teeny__op_name(teeny__op_id id)
{
    return id < TEENY__OP_COUNT ? op_names[id] : "?";
}
