/*
 * ops.h -- the op table. Every op is one line in ops.def, from which this
 * header generates the op enum, the entry points' prototypes and the slot
 * counts, and ops.c the table; each family's src/ops/<family>.c defines
 * the functions, its eager API among them. The graph executor reaches
 * kernels only through the table, so adding an op never touches it; this
 * header gets the op's slot enum (and its attribute struct, if any).
 * ARCHITECTURE.md, "A new op, worked", walks through one.
 *
 * Arguments travel in one struct: tensors in fixed slots per op (the
 * enums below name them) and the op's typed attributes.
 */
#ifndef TEENY_OPS_H
#define TEENY_OPS_H

#include <math.h>

#include "../internal.h"

typedef enum {
#define XX(e, name, family, fn, attrs, grad, slots) TEENY__OP_##e,
#include "ops.def"
#undef XX
    TEENY__OP_COUNT
} teeny__op_id;

/* Each op's attributes, typed; the attrs column of ops.def names the member
 * of teeny__op_attrs an op reads. Graph nodes store the union, so the graph
 * carries attributes without knowing any op. Fields are read by the family
 * file named in the comment. */
typedef struct { char unused; } teeny__none_attrs;                   /* add, mul, global_avgpool */
typedef struct {
    teeny_act act;
    float alpha, beta; /* HARDSIGMOID, LEAKY_RELU, CLIP (teeny_act_params); teeny__act_attrs: the defaults */
} teeny__activation_attrs;                                           /* elementwise.c */
#define TEENY__ACT_COUNT ((int)TEENY_ACT_ROUND_HALF + 1) /* teeny_act values 0..count-1 */
/* act with ONNX's default parameters (what cl/common.cl's teeny_act uses). */
static inline teeny__activation_attrs teeny__act_attrs(teeny_act act)
{
    teeny__activation_attrs at = {act, 0.01f, INFINITY};
    if (act == TEENY_ACT_HARDSIGMOID)
        at.alpha = 0.2f, at.beta = 0.5f;
    if (act == TEENY_ACT_CLIP)
        at.alpha = -INFINITY;
    return at;
}
typedef struct { float momentum, eps; int act; } teeny__batchnorm_attrs; /* batchnorm.c; act: a teeny_act */
typedef struct {
    int kernel[2], stride[2], pad[2];   /* [0] = H, [1] = W; pad: before the input */
    int pad_end_extra[2];               /* the padding after is pad + pad_end_extra */
    int dilation[2];                    /* 0 counts as 1 */
    int ceil_mode, exclude_pad, large_pads;
    int storage_order;                  /* maxpool2d_indices: 1 counts each plane column-major */
} teeny__pool2d_attrs;                  /* pool.c */
typedef struct { int out_features, has_bias; } teeny__linear_attrs;  /* linear.c */
typedef struct {
    int n_inputs;       /* 1..TEENY__OP_MAX_SLOTS, the node's inputs */
    int first_channel;  /* channel of y the first input lands on (0 in a graph) */
} teeny__concat_attrs;  /* concat.c */
typedef struct { int first_channel, count; } teeny__slice_attrs;     /* concat.c: y = x[:, first, first + count) */
typedef struct {
    int stride[2], pad[2], dilation[2], groups; /* [0] = H, [1] = W */
    teeny_act act;                              /* after the convolution (route.c: in its epilogue or a pass) */
    int pad_end_extra[2];                       /* the padding after is pad + pad_end_extra */
    int has_bias;                               /* 0 or 1 */
    int out_channels, kernel_h, kernel_w;       /* the weight's shape; read by infer only */
    int in_per_group;                           /* the weight's dimension 1 (infer only); 0: Cin / groups */
    float act_alpha, act_beta;                  /* act's parameters (teeny_act_params; defaults: teeny__act_attrs) */
} teeny__conv2d_attrs;                          /* conv2d.c */
/* loss.c: teeny_ce_params (reduction: teeny_reduction; has_ignore: ignore_index counts) */
typedef struct { int reduction, has_ignore, ignore_index; } teeny__softmax_ce_attrs;
static inline teeny__softmax_ce_attrs teeny__softmax_ce_attrs_of(const teeny_ce_params *p)
{
    return p ? (teeny__softmax_ce_attrs){(int)p->reduction, p->use_ignore_index != 0, p->ignore_index}
             : (teeny__softmax_ce_attrs){0, 0, 0};
}
/* attention_op.c: teeny_attention_params; default_scale: scale 0 is 1/sqrt(D) (the _ex functions' rule) */
typedef struct { float scale; int causal, causal_offset, heads; float softcap; int default_scale; }
    teeny__attention_attrs;
typedef struct { int heads, key_dim; } teeny__psa_attrs;             /* psa.c */
typedef struct { int heads, height, width; } teeny__psa_merge_attrs; /* psa.c */

/* The attributes of the public parameter structs (the eager API and the
 * graph builders both take them). */
static inline teeny__pool2d_attrs teeny__pool2d_attrs_of(const teeny_pool2d_params *p)
{
    return (teeny__pool2d_attrs){{p->kernel[0], p->kernel[1]},
                                 {p->stride[0], p->stride[1]},
                                 {p->pad[0], p->pad[1]},
                                 {p->pad_end_extra[0], p->pad_end_extra[1]},
                                 {p->dilation[0], p->dilation[1]},
                                 p->ceil_mode,
                                 p->exclude_pad,
                                 p->large_pads,
                                 0};
}
static inline teeny__conv2d_attrs teeny__conv2d_attrs_of(const teeny_conv2d_params *p, teeny_act act, int has_bias,
                                                         int out_channels, int kernel_h, int kernel_w, int in_per_group)
{
    return (teeny__conv2d_attrs){{p->stride[0], p->stride[1]},
                                 {p->pad[0], p->pad[1]},
                                 {p->dilation[0], p->dilation[1]},
                                 p->groups,
                                 act,
                                 {p->pad_end_extra[0], p->pad_end_extra[1]},
                                 has_bias,
                                 out_channels, kernel_h, kernel_w, in_per_group,
                                 teeny__act_attrs(act).alpha, teeny__act_attrs(act).beta};
}

/* ---- group A (ONNX phase 2): broadcasting, reductions, layout, norms ---- */
typedef struct { teeny_binary_op op; } teeny__binary_attrs;          /* strided.c */
typedef struct {
    unsigned axes;      /* bit d: axis d is reduced */
    int keepdims, mean; /* 0 or 1 */
} teeny__reduce_attrs;  /* strided.c */
typedef struct { int perm[TEENY_MAX_DIMS]; } teeny__transpose_attrs; /* layout.c: y dim d = x dim perm[d] */
typedef struct {
    int64_t start[TEENY_MAX_DIMS], end[TEENY_MAX_DIMS], step[TEENY_MAX_DIMS]; /* ONNX Slice, per axis */
} teeny__slicend_attrs; /* layout.c */
typedef struct {
    int64_t lo[TEENY_MAX_DIMS], hi[TEENY_MAX_DIMS]; /* per axis, before and after; negative crops */
    float value;
} teeny__pad_attrs;     /* layout.c */
typedef struct { int ndim; int64_t shape[TEENY_MAX_DIMS]; } teeny__expand_attrs; /* layout.c: the target */
typedef struct {
    int n_inputs, axis;
    int first;          /* where along the axis of y the first input lands (0 in a graph) */
} teeny__cat_attrs;     /* layout.c: concat_axis */
typedef struct { int axis; } teeny__gather_attrs;                    /* layout.c */
typedef struct { int axis, log, masked_zero; } teeny__softmax_attrs; /* norm.c: teeny_softmax_params */
typedef struct { int axis; float eps; int has_bias; } teeny__layernorm_attrs; /* norm.c: normalized over axis.. */
/* ---- resize (ONNX phase 3) ---- */
typedef struct {
    int mode, coord, rounding; /* teeny_resize_mode, teeny_resize_coord, teeny_resize_rounding */
    int size[2];               /* OH, OW */
    float scale[2];            /* 0: size / input size */
} teeny__resize2d_attrs;       /* resize.c */

/* ---- group B (ONNX phase 2): transposed convolution ---- */
typedef struct {
    int stride[2], pad[2], pad_end_extra[2], dilation[2], output_padding[2], groups; /* [0] = H, [1] = W */
    int has_bias;                                /* 0 or 1 */
    int out_channels, kernel_h, kernel_w;        /* the weight's [Cin, out_channels/groups, KH, KW] (infer) */
} teeny__conv_transpose2d_attrs;                 /* conv_transpose.c */
static inline teeny__conv_transpose2d_attrs teeny__conv_transpose2d_attrs_of(const teeny_conv_transpose2d_params *p,
                                                                             int has_bias, int out_channels,
                                                                             int kernel_h, int kernel_w)
{
    return (teeny__conv_transpose2d_attrs){{p->stride[0], p->stride[1]},
                                           {p->pad[0], p->pad[1]},
                                           {p->pad_end_extra[0], p->pad_end_extra[1]},
                                           {p->dilation[0], p->dilation[1]},
                                           {p->output_padding[0], p->output_padding[1]},
                                           p->groups,
                                           has_bias,
                                           out_channels,
                                           kernel_h,
                                           kernel_w};
}

typedef union {
    teeny__none_attrs none;
    teeny__activation_attrs activation;
    teeny__batchnorm_attrs batchnorm;
    teeny__pool2d_attrs pool2d;
    teeny__linear_attrs linear;
    teeny__concat_attrs concat;
    teeny__slice_attrs slice;
    teeny__conv2d_attrs conv2d;
    teeny__attention_attrs attention;
    teeny__psa_attrs psa;
    teeny__psa_merge_attrs psa_merge;
    teeny__binary_attrs binary;
    teeny__reduce_attrs reduce;
    teeny__transpose_attrs transpose;
    teeny__slicend_attrs slicend;
    teeny__pad_attrs pad;
    teeny__expand_attrs expand;
    teeny__cat_attrs cat;
    teeny__gather_attrs gather;
    teeny__softmax_attrs softmax;
    teeny__layernorm_attrs layernorm;
    teeny__conv_transpose2d_attrs conv_transpose2d;
    teeny__resize2d_attrs resize2d;
    teeny__softmax_ce_attrs softmax_ce;
} teeny__op_attrs;

#define TEENY__OP_MAX_TENSORS 12
#define TEENY__OP_MAX_SLOTS 4 /* inputs, params, states or saved tensors of one node */

typedef struct {
    const teeny_tensor *in[TEENY__OP_MAX_TENSORS]; /* read; by slot (below) */
    teeny_tensor *out[TEENY__OP_MAX_TENSORS];      /* written (incl. updated state); NULL: not wanted */
    teeny__op_attrs attrs;
    int training;                                  /* graph mode: 1 training, 0 inference */
    int frozen;                                    /* forward of a plan with frozen parameters: the param
                                                    * slots hold constants, so data derived from them may be
                                                    * recorded as setup launches (teeny__record_setup) */
} teeny__op_args;

/* ---- slots ----
 * Every tensor of an op sits at a fixed position of teeny__op_args, from
 * the op's counts in ops.def (SLOTS: at most .in inputs, .param params,
 * .state states, .saved saved tensors):
 *   in   [inputs | params | states | value | saved | dvalue]
 *        forward reads the first three groups, backward all six
 *   out  forward:  [value | saved | states]  (states updated in place,
 *                                             training only)
 *        backward: out[i] is the gradient of in[i] (inputs and params)
 * A slot a call or node lacks (a layer without bias, a concat of two
 * inputs, a saved tensor outside training, a gradient not wanted) is
 * NULL. Each op names its slots of `in` in one enum, TEENY__<OP>_<SLOT>
 * (a gradient goes to out[] at the slot of its tensor), and a forward's
 * `out` past the value TEENY__<OP>_OUT_<SLOT>; the enum ends with
 * TEENY__<OP>_IN_SLOTS, which tests/test_ops.c checks against ops.def. */
typedef struct {
    int in, param, state, saved;
} teeny__op_slots;

static inline teeny__op_slots teeny__op_slots_of(teeny__op_id id)
{
    static const teeny__op_slots slots[TEENY__OP_COUNT] = {
#define SLOTS(...) {__VA_ARGS__}
#define XX(e, name, family, fn, attrs, grad, slots) [TEENY__OP_##e] = slots,
#include "ops.def"
#undef XX
#undef SLOTS
    };
    return slots[id];
}

/* Where each group starts in `in` (value and dvalue are one slot each)
 * and, for a forward, the states in `out`. */
static inline int teeny__slot_param(teeny__op_slots s) { return s.in; }
static inline int teeny__slot_state(teeny__op_slots s) { return s.in + s.param; }
static inline int teeny__slot_value(teeny__op_slots s) { return s.in + s.param + s.state; }
static inline int teeny__slot_saved(teeny__op_slots s) { return s.in + s.param + s.state + 1; }
static inline int teeny__slot_dvalue(teeny__op_slots s) { return s.in + s.param + s.state + 1 + s.saved; }
static inline int teeny__slot_out_state(teeny__op_slots s) { return 1 + s.saved; }

#define TEENY__OUT_VALUE 0 /* out[0] of every forward */

/* elementwise.c */
enum { TEENY__ADD_A, TEENY__ADD_B, TEENY__ADD_Y, TEENY__ADD_DY, TEENY__ADD_IN_SLOTS };
enum { TEENY__MUL_A, TEENY__MUL_B, TEENY__MUL_Y, TEENY__MUL_DY, TEENY__MUL_IN_SLOTS };
enum { TEENY__ACTIVATION_X, TEENY__ACTIVATION_Y, TEENY__ACTIVATION_DY, TEENY__ACTIVATION_IN_SLOTS };
/* batchnorm.c */
enum {
    TEENY__BATCHNORM_X,
    TEENY__BATCHNORM_WEIGHT,
    TEENY__BATCHNORM_BIAS,
    TEENY__BATCHNORM_RUNNING_MEAN,
    TEENY__BATCHNORM_RUNNING_VAR,
    TEENY__BATCHNORM_Y,
    TEENY__BATCHNORM_SAVE_MEAN,
    TEENY__BATCHNORM_SAVE_RSTD,
    TEENY__BATCHNORM_DY,
    TEENY__BATCHNORM_IN_SLOTS
};
enum { TEENY__BATCHNORM_OUT_SAVE_MEAN = 1, TEENY__BATCHNORM_OUT_SAVE_RSTD, TEENY__BATCHNORM_OUT_RUNNING_MEAN,
       TEENY__BATCHNORM_OUT_RUNNING_VAR };
/* pool.c */
enum { TEENY__MAXPOOL2D_X, TEENY__MAXPOOL2D_Y, TEENY__MAXPOOL2D_ARGMAX, TEENY__MAXPOOL2D_DY, TEENY__MAXPOOL2D_IN_SLOTS };
enum { TEENY__MAXPOOL2D_OUT_ARGMAX = 1 };
enum { TEENY__AVGPOOL2D_X, TEENY__AVGPOOL2D_Y, TEENY__AVGPOOL2D_DY, TEENY__AVGPOOL2D_IN_SLOTS };
enum { TEENY__GLOBAL_AVGPOOL_X, TEENY__GLOBAL_AVGPOOL_Y, TEENY__GLOBAL_AVGPOOL_DY, TEENY__GLOBAL_AVGPOOL_IN_SLOTS };
/* group B: pool.c */
enum { TEENY__MAXPOOL2D_INDICES_X, TEENY__MAXPOOL2D_INDICES_IN_SLOTS }; /* no gradient: the inputs alone */
enum { TEENY__GLOBAL_MAXPOOL_X, TEENY__GLOBAL_MAXPOOL_Y, TEENY__GLOBAL_MAXPOOL_ARGMAX, TEENY__GLOBAL_MAXPOOL_DY,
       TEENY__GLOBAL_MAXPOOL_IN_SLOTS };
enum { TEENY__GLOBAL_MAXPOOL_OUT_ARGMAX = 1 };
/* group B: conv_transpose.c */
enum {
    TEENY__CONV_TRANSPOSE2D_X,
    TEENY__CONV_TRANSPOSE2D_WEIGHT,
    TEENY__CONV_TRANSPOSE2D_BIAS,
    TEENY__CONV_TRANSPOSE2D_Y,
    TEENY__CONV_TRANSPOSE2D_DY,
    TEENY__CONV_TRANSPOSE2D_IN_SLOTS
};
/* linear.c */
enum { TEENY__LINEAR_X, TEENY__LINEAR_WEIGHT, TEENY__LINEAR_BIAS, TEENY__LINEAR_Y, TEENY__LINEAR_DY, TEENY__LINEAR_IN_SLOTS };
/* loss.c */
enum {
    TEENY__SOFTMAX_CE_LOGITS,
    TEENY__SOFTMAX_CE_LABELS,
    TEENY__SOFTMAX_CE_WEIGHTS, /* optional: [K] class weights (no gradient) */
    TEENY__SOFTMAX_CE_LOSS,
    TEENY__SOFTMAX_CE_PROBS,
    TEENY__SOFTMAX_CE_DLOSS,
    TEENY__SOFTMAX_CE_IN_SLOTS
};
enum { TEENY__SOFTMAX_CE_OUT_PROBS = 1 };
/* concat.c: inputs TEENY__CONCAT_X0 + i */
enum { TEENY__CONCAT_X0, TEENY__CONCAT_Y = TEENY__OP_MAX_SLOTS, TEENY__CONCAT_DY, TEENY__CONCAT_IN_SLOTS };
enum { TEENY__SLICE_CHANNELS_X, TEENY__SLICE_CHANNELS_Y, TEENY__SLICE_CHANNELS_DY, TEENY__SLICE_CHANNELS_IN_SLOTS };
/* conv2d.c: scale and shift (the fused epilogue's) are params the eager
 * API alone fills; a graph node leaves them NULL. PRE, saved: the
 * pre-activation of a graph node with an activation, in training. */
enum {
    TEENY__CONV2D_X,
    TEENY__CONV2D_WEIGHT,
    TEENY__CONV2D_BIAS,
    TEENY__CONV2D_SCALE,
    TEENY__CONV2D_SHIFT,
    TEENY__CONV2D_Y,
    TEENY__CONV2D_PRE,
    TEENY__CONV2D_DY,
    TEENY__CONV2D_IN_SLOTS
};
/* attention.c: mask is optional and gets no gradient */
enum {
    TEENY__ATTENTION_Q,
    TEENY__ATTENTION_K,
    TEENY__ATTENTION_V,
    TEENY__ATTENTION_MASK,
    TEENY__ATTENTION_O,
    TEENY__ATTENTION_LSE,
    TEENY__ATTENTION_DO,
    TEENY__ATTENTION_IN_SLOTS
};
enum { TEENY__ATTENTION_OUT_LSE = 1 };
/* psa.c */
enum { TEENY__PSA_ATTENTION_QKV, TEENY__PSA_ATTENTION_O, TEENY__PSA_ATTENTION_LSE, TEENY__PSA_ATTENTION_DO,
       TEENY__PSA_ATTENTION_IN_SLOTS };
enum { TEENY__PSA_ATTENTION_OUT_LSE = 1 };
enum { TEENY__PSA_PACK_QKV_QKV, TEENY__PSA_PACK_QKV_PACKED, TEENY__PSA_PACK_QKV_DPACKED, TEENY__PSA_PACK_QKV_IN_SLOTS };
enum { TEENY__PSA_EXTRACT_V_QKV, TEENY__PSA_EXTRACT_V_V, TEENY__PSA_EXTRACT_V_DV, TEENY__PSA_EXTRACT_V_IN_SLOTS };
enum { TEENY__PSA_MERGE_ATTN_LO, TEENY__PSA_MERGE_ATTN_HI, TEENY__PSA_MERGE_ATTN_OUT, TEENY__PSA_MERGE_ATTN_DOUT,
       TEENY__PSA_MERGE_ATTN_IN_SLOTS };

/* ---- group A slots ---- */
/* strided.c */
enum { TEENY__BINARY_A, TEENY__BINARY_B, TEENY__BINARY_Y, TEENY__BINARY_DY, TEENY__BINARY_IN_SLOTS };
enum { TEENY__REDUCE_X, TEENY__REDUCE_Y, TEENY__REDUCE_DY, TEENY__REDUCE_IN_SLOTS };
/* layout.c */
enum { TEENY__TRANSPOSE_X, TEENY__TRANSPOSE_Y, TEENY__TRANSPOSE_DY, TEENY__TRANSPOSE_IN_SLOTS };
enum { TEENY__SLICE_X, TEENY__SLICE_Y, TEENY__SLICE_DY, TEENY__SLICE_IN_SLOTS };
enum { TEENY__PAD_X, TEENY__PAD_Y, TEENY__PAD_DY, TEENY__PAD_IN_SLOTS };
enum { TEENY__EXPAND_X, TEENY__EXPAND_Y, TEENY__EXPAND_DY, TEENY__EXPAND_IN_SLOTS };
enum { TEENY__CONCAT_AXIS_X0, TEENY__CONCAT_AXIS_Y = TEENY__OP_MAX_SLOTS, TEENY__CONCAT_AXIS_DY,
       TEENY__CONCAT_AXIS_IN_SLOTS };
enum { TEENY__GATHER_X, TEENY__GATHER_INDICES, TEENY__GATHER_Y, TEENY__GATHER_DY, TEENY__GATHER_IN_SLOTS };
/* norm.c */
enum { TEENY__SOFTMAX_X, TEENY__SOFTMAX_Y, TEENY__SOFTMAX_DY, TEENY__SOFTMAX_IN_SLOTS };
enum {
    TEENY__LAYERNORM_X,
    TEENY__LAYERNORM_WEIGHT,
    TEENY__LAYERNORM_BIAS,
    TEENY__LAYERNORM_Y,
    TEENY__LAYERNORM_MEAN,
    TEENY__LAYERNORM_RSTD,
    TEENY__LAYERNORM_DY,
    TEENY__LAYERNORM_IN_SLOTS
};
enum { TEENY__LAYERNORM_OUT_MEAN = 1, TEENY__LAYERNORM_OUT_RSTD };
/* matmul.c */
enum { TEENY__MATMUL_A, TEENY__MATMUL_B, TEENY__MATMUL_Y, TEENY__MATMUL_DY, TEENY__MATMUL_IN_SLOTS };
/* ---- resize slots (ONNX phase 3) ---- */
/* resize.c */
enum { TEENY__RESIZE2D_X, TEENY__RESIZE2D_Y, TEENY__RESIZE2D_DY, TEENY__RESIZE2D_IN_SLOTS };

typedef teeny_status (*teeny__op_fn)(teeny_ctx *ctx, const teeny__op_args *a);

/* Shapes and parameters of one graph node, filled by an op's infer slot
 * from its input shapes and attributes. */
typedef enum { TEENY__INIT_ZEROS, TEENY__INIT_ONES, TEENY__INIT_FAN_IN } teeny__init;

typedef struct {
    int ndim;
    int64_t shape[TEENY_MAX_DIMS];
    int is_i32;
} teeny__shape;

typedef struct {
    /* given */
    int n_in;
    teeny__shape in[TEENY__OP_MAX_SLOTS];
    teeny__op_attrs attrs;
    /* filled by infer */
    teeny__shape out;                                /* the node's value */
    int n_param, n_state, n_saved;
    teeny__shape param[TEENY__OP_MAX_SLOTS];         /* learned; receive gradients */
    teeny__shape state[TEENY__OP_MAX_SLOTS];         /* persistent, not learned (running stats) */
    teeny__shape saved[TEENY__OP_MAX_SLOTS];         /* forward results kept for backward */
    const char *param_name[TEENY__OP_MAX_SLOTS];     /* PyTorch state_dict suffixes: "weight", "bias" */
    const char *state_name[TEENY__OP_MAX_SLOTS];     /* "running_mean", "running_var" */
    teeny__init param_init[TEENY__OP_MAX_SLOTS];
    teeny__init state_init[TEENY__OP_MAX_SLOTS];
    int64_t fan_in;                                  /* for TEENY__INIT_FAN_IN: U(-1/sqrt(fan_in), +) */
    int saved_needs_training;                        /* saved tensors only exist in training mode */
    int counts_batches;                              /* checkpoints carry <node>.num_batches_tracked */
} teeny__node_shapes;

/* infer: validate the inputs and attributes, fill the rest. Records a
 * message in ctx on failure. */
typedef teeny_status (*teeny__infer_fn)(teeny_ctx *ctx, teeny__node_shapes *s);

#include "cpu_gemm.h" /* conv2d/gemm_run.c's CPU GEMM, which the linear family shares */

/* ---- strided.c: the strided copy and sum the group A families share ----
 * An index space of ndim (1..8) dimensions, outermost first. */
typedef struct {
    int ndim;
    int64_t n[8];          /* the space: the written tensor's coordinates */
    int64_t xs[8], ys[8];  /* element strides of source and destination (0: broadcast; negative: reversed) */
    int64_t lo[8], hi[8];  /* coordinate c reads the source at c - lo when lo <= c < hi, else pad */
    cl_mem x, y;
    int x_off, y_off;      /* element offsets */
    float pad, scale;      /* y = scale * x inside the window */
    cl_mem map;            /* NULL, or int32 source coordinates along map_axis: x at map[map_off + c] */
    int map_off, map_axis, map_dim; /* map_axis -1: none; map entries outside [0, map_dim) give pad */
} teeny__st_copy_args;
/* A copy over space[0..ndim): lo 0, hi the sizes, scale 1, no map. */
teeny__st_copy_args teeny__st_copy_init(int ndim, const int64_t *space);
teeny_status teeny__st_copy(teeny_ctx *ctx, const teeny__st_copy_args *c);
/* y (contiguous over the dimensions not in mask, in order) = scale * the
 * sum of x over the dimensions in mask (bit d: dimension d) of the space
 * dims[0..ndim), x's element strides xs. Deterministic; parts in
 * workspace when long; TEENY_ERR_UNSUPPORTED past the loop budget. */
teeny_status teeny__st_reduce(teeny_ctx *ctx, cl_mem x, int x_off, int ndim, const int64_t *dims, const int64_t *xs,
                              unsigned mask, float scale, cl_mem y, int y_off);
void teeny__st_contiguous(const int64_t *shape, int ndim, int64_t *strides);
/* x's strides in y's space, x broadcast to y (NumPy: aligned at the last
 * dimension; 0 where x has size 1 or no dimension); TEENY_ERR_SHAPE when
 * x does not broadcast to y. */
teeny_status teeny__st_broadcast_strides(const teeny__shape *x, const teeny__shape *y, int64_t *strides);
/* The dimensions of y that x was broadcast along (bit d). */
unsigned teeny__st_broadcast_mask(const teeny__shape *x, const teeny__shape *y);

/*
 * The op-table entry. forward and backward take their tensors by slot
 * ("slots" above), the eager API and the graph alike; a backward's outputs
 * may be NULL (not wanted), and every one given is overwritten, never
 * accumulated. Ops never enqueue directly: they launch through teeny__launch and
 * teeny__fill and take workspace from teeny__scratch, so the graph can
 * record a node's launches once (its own cl_kernel objects, arguments set
 * at compile time) and replay them.
 */
typedef struct {
    const char *name;       /* required */
    const char *family;     /* required */
    teeny__infer_fn infer;  /* required */
    teeny__op_fn forward;   /* required */
    teeny__op_fn backward;  /* optional: NULL when the op has no gradient (NOGRAD) */
    int grad_passes;        /* PASS: every input's gradient is dy itself (graph_compile.c shares its buffer) */
} teeny__op;

extern const teeny__op teeny__ops[TEENY__OP_COUNT];

/* Check a table (teeny__ops, or a copy) of n entries: every required slot
 * set. TEENY_ERR_STATE, naming the first op and slot missing, if not. */
teeny_status teeny__ops_check(teeny_ctx *ctx, const teeny__op *table, int n);
const char *teeny__op_name(teeny__op_id id);

/* Entry points each family file defines, by the convention of ops.def. */
#define TEENY__OP_PROTO_GRAD(fn) teeny_status teeny__##fn##_backward(teeny_ctx *ctx, const teeny__op_args *a);
#define TEENY__OP_PROTO_NOGRAD(fn)
#define TEENY__OP_PROTO_PASS(fn) TEENY__OP_PROTO_GRAD(fn)
#define XX(e, name, family, fn, attrs, grad, slots)                            \
    teeny_status teeny__##fn##_infer(teeny_ctx *ctx, teeny__node_shapes *s);  \
    teeny_status teeny__##fn##_forward(teeny_ctx *ctx, const teeny__op_args *a); \
    TEENY__OP_PROTO_##grad(fn)
#include "ops.def"
#undef XX

#include "hooks.h" /* what the tests see of the ops beyond the table */
/* The head dims the flash kernels take (attention.c): D (of q and k) and Dv. */
#define TEENY__ATTN_MAX_D 128
#define TEENY__ATTN_MAX_DV 256
/* Flash attention over strided matrices (attention.c), shared by the
 * contiguous and the fused PSA paths: element (bh, n, c) of a matrix at
 * off + (bh / heads)*sb + (bh % heads)*sh + n*sn + c*sd of buf. A NULL buf
 * marks an output that is not wanted (lse in forward; dq, dk, dv_out). */
typedef struct { cl_mem buf; int off, sb, sh, sn, sd; } teeny__attn_mat;
typedef struct {
    int bh, heads, n_q, n_k, d, dv;
    float scale;
    teeny__attn_mat q, k, v, o, d_o, dq, dk, dv_out;
    cl_mem lse;
    int lse_off;
    /* masks (zero: none): mask.buf NULL for no additive mask, else element
     * (bh, i, j) at off + (bh / mask_heads)*sb + (bh % mask_heads)*sh +
     * i*sn + j*sd (0 strides broadcast); key j visible to query i iff
     * j <= i + causal_off when causal; softcap > 0 caps the scores */
    teeny__attn_mat mask;
    int mask_heads, causal, causal_off;
    float softcap;
} teeny__attn_problem;
teeny_status teeny__attn_forward_run(teeny_ctx *ctx, const teeny__attn_problem *p);
teeny_status teeny__attn_backward_run(teeny_ctx *ctx, const teeny__attn_problem *p);

/* optim.c: parameters per Adam launch here (1..8; profile, argument space). */
int teeny__optim_adam_slots(const teeny_ctx *ctx);
/* Optimizer state i (optim.c) for checkpoints: parameter *param_index's, the
 * tensor *param (borrowed), as its *kind ("momentum_buffer", "exp_avg" or
 * "exp_avg_sq"). TEENY_ERR_ARG for an index out of range. */
teeny_status teeny__optimizer_state_param(const teeny_optimizer *o, int i, const teeny_tensor **param,
                                          int *param_index, const char **kind);

/* ---- running a pass ----
 * The op owns the workspace it takes until it returns (teeny__scratch). */
static inline teeny_status teeny__op_exec(teeny_ctx *ctx, teeny__op_fn fn, const teeny__op_args *a)
{
    ctx->ws.op_depth++;
    teeny_status st = fn(ctx, a);
    if (--ctx->ws.op_depth == 0)
        teeny__scratch_release_all(ctx);
    return st;
}

/* A pass through the table: what the graph does (the families' eager
 * functions call their own passes, so no family calls into ops.c). */
static inline teeny_status teeny__op_run(teeny_ctx *ctx, teeny__op_id id, int backward, const teeny__op_args *a)
{
    teeny__op_fn fn = backward ? teeny__ops[id].backward : teeny__ops[id].forward;
    if (!fn)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "op %s has no %s pass", teeny__ops[id].name,
                            backward ? "backward" : "forward");
    return teeny__op_exec(ctx, fn, a);
}

/* ---- the eager API (eager.c) ----
 * An eager function lists its tensors by the op's slots and runs them
 * through teeny__eager_run, which makes the op's infer the one validator
 * of shapes and attributes, for the graph and the eager API alike:
 *   1. every tensor: TEENY_ERR_ARG when NULL (unless optional), destroyed,
 *      of another context or of the wrong dtype;
 *   2. the inputs' shapes (an input not given: its gradient's; or all of
 *      them from e->in_shapes) and the attributes go through the op's
 *      infer, whose message is reported after the function's name;
 *   3. every other tensor must have the shape infer gives its slot
 *      (TEENY_ERR_SHAPE, naming both shapes);
 *   4. nothing written may overlap another tensor (TEENY_ERR_ARG);
 *   5. the pass runs with the tensors in their slots.
 * Nothing is enqueued or written before 1-4 pass. */
typedef enum {
    TEENY__EA_OUT = 1 << 0,      /* written: a->out[slot] (else read: a->in[slot]) */
    TEENY__EA_OPTIONAL = 1 << 1, /* may be NULL: its slot stays NULL */
    TEENY__EA_I32 = 1 << 2,      /* an int32 tensor */
    TEENY__EA_NUMEL = 1 << 3,    /* any shape of the element count infer gives (an input: infer sees [numel]) */
    TEENY__EA_HW1 = 1 << 4,      /* infer's shape, or it followed by 1, 1 (global pooling's [B, C, 1, 1]) */
    TEENY__EA_INPLACE = 1 << 5,  /* a written tensor that may be exactly one read (in place) */
    TEENY__EA_UPDATED = 1 << 6,  /* a state the forward updates in place: read and written (out[] too) */
} teeny__ea_flags;

typedef struct {
    const char *name; /* as the header names the argument: "x", "weight", "dy" */
    const teeny_tensor *t;
    int slot;       /* the op's slot (ops.h): of `in`, or of `out` with TEENY__EA_OUT */
    unsigned flags; /* teeny__ea_flags */
} teeny__earg;

typedef struct {
    const char *fn;        /* the public function, first in every message */
    teeny__op_id op;       /* whose slots the arguments name */
    teeny__infer_fn infer; /* the op's infer */
    teeny__op_fn pass;     /* its forward or backward */
    int backward;          /* pass is the backward: out[] slots are gradients of in[] slots */
    teeny__op_attrs attrs;
    int training;
    const teeny__shape *in_shapes; /* NULL, or every input's shape (a backward given none of its inputs) */
} teeny__eager;

/* The fields every eager call sets, by ops.def's convention: the public
 * function's name, the op (its ENUM) and its fn column, and the pass
 * (forward or backward): TEENY__EAGER_OF("teeny_add", ADD, add, forward). */
#define TEENY__EAGER_OF(NAME, OP, FN, PASS)                                                                            \
    .fn = NAME, .op = TEENY__OP_##OP, .infer = teeny__##FN##_infer, .pass = teeny__##FN##_##PASS,                      \
    .backward = TEENY__EAGER_BACKWARD_##PASS
#define TEENY__EAGER_BACKWARD_forward 0
#define TEENY__EAGER_BACKWARD_backward 1

/* Step 1 alone (a function that reads a tensor's shape before it can set
 * its attributes). */
teeny_status teeny__eager_tensors(teeny_ctx *ctx, const char *fn, const teeny__earg *args, int n);
/* Steps 1-4; a receives the tensors in their slots, e's attributes and
 * training. */
teeny_status teeny__eager_check(teeny_ctx *ctx, const teeny__eager *e, const teeny__earg *args, int n,
                                teeny__op_args *a);
/* Steps 1-5. */
teeny_status teeny__eager_run(teeny_ctx *ctx, const teeny__eager *e, const teeny__earg *args, int n);
/* t has rank ndim (t checked by step 1), else TEENY_ERR_SHAPE naming the
 * layout ("[Cout, Cin/groups, KH, KW]"): for a tensor whose shape gives an
 * attribute. */
teeny_status teeny__eager_rank(teeny_ctx *ctx, const char *fn, const teeny_tensor *t, const char *name, int ndim,
                               const char *layout);
/* A tensor's shape as infer sees it. */
teeny__shape teeny__shape_of(const teeny_tensor *t);

/* The first lines of every eager function: a live ctx, a cleared error. */
#define EAGER_BEGIN(fn)                                                                                                \
    if (!teeny__ctx_check(ctx))                                                                                        \
        return teeny__error(NULL, TEENY_ERR_ARG, fn ": ctx is NULL or destroyed");                                     \
    teeny__clear_error(ctx)

#endif
