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
    [TEENY__OP_MUL] = {.name = "mul", .family = "elementwise", .infer = teeny__mul_infer,
                       .forward = teeny__mul_forward, .backward = teeny__mul_backward},
    [TEENY__OP_MAXPOOL2D] = {.name = "maxpool2d", .family = "pool", .infer = teeny__maxpool2d_infer,
                             .forward = teeny__maxpool2d_forward, .backward = teeny__maxpool2d_backward},
    [TEENY__OP_AVGPOOL2D] = {.name = "avgpool2d", .family = "pool", .infer = teeny__avgpool2d_infer,
                             .forward = teeny__avgpool2d_forward, .backward = teeny__avgpool2d_backward},
    [TEENY__OP_GLOBAL_AVGPOOL] = {.name = "global_avgpool", .family = "pool", .infer = teeny__global_avgpool_infer,
                                  .forward = teeny__global_avgpool_forward,
                                  .backward = teeny__global_avgpool_backward},
    [TEENY__OP_LINEAR] = {.name = "linear", .family = "linear", .infer = teeny__linear_infer,
                          .forward = teeny__linear_forward, .backward = teeny__linear_backward},
    [TEENY__OP_SOFTMAX_CE] = {.name = "softmax_ce", .family = "loss", .infer = teeny__softmax_ce_infer,
                              .forward = teeny__softmax_ce_forward, .backward = teeny__softmax_ce_backward},
    [TEENY__OP_CONCAT] = {.name = "concat", .family = "concat", .infer = teeny__concat_infer,
                          .forward = teeny__concat_forward, .backward = teeny__concat_backward},
    [TEENY__OP_SLICE_CHANNELS] = {.name = "slice_channels", .family = "concat", .infer = teeny__slice_channels_infer,
                                  .forward = teeny__slice_channels_forward,
                                  .backward = teeny__slice_channels_backward},
    [TEENY__OP_CONV2D] = {.name = "conv2d", .family = "conv2d", .infer = teeny__conv2d_infer,
                          .forward = teeny__conv2d_forward, .backward = teeny__conv2d_backward},
    [TEENY__OP_ATTENTION] = {.name = "attention", .family = "attention", .infer = teeny__attention_infer,
                             .forward = teeny__attention_forward, .backward = teeny__attention_backward},
    [TEENY__OP_PSA_ATTENTION] = {.name = "psa_attention", .family = "psa", .infer = teeny__psa_attention_infer,
                                 .forward = teeny__psa_attention_forward, .backward = teeny__psa_attention_backward},
    [TEENY__OP_PSA_PACK_QKV] = {.name = "psa_pack_qkv", .family = "psa", .infer = teeny__psa_pack_infer,
                                .forward = teeny__psa_pack_forward, .backward = teeny__psa_pack_backward},
    [TEENY__OP_PSA_EXTRACT_V] = {.name = "psa_extract_v", .family = "psa", .infer = teeny__psa_extract_v_infer,
                                 .forward = teeny__psa_extract_v_forward, .backward = teeny__psa_extract_v_backward},
    [TEENY__OP_PSA_MERGE_ATTN] = {.name = "psa_merge_attn", .family = "psa", .infer = teeny__psa_merge_infer,
                                  .forward = teeny__psa_merge_forward, .backward = teeny__psa_merge_backward},
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
