/*
 * ops.h -- the op table. Every op is one line in ops.def, from which this
 * header generates the op enum and the entry points' prototypes and ops.c
 * the table; each family's src/ops/<family>.c defines the functions. The
 * eager API and the graph executor reach kernels only through this table,
 * so adding an op never touches the executor, ops.c or this header (unless
 * it brings a new attribute struct).
 *
 * Arguments travel in one struct: tensors in a fixed order per op (see each
 * op's comment in its family file) and the op's typed attributes.
 */
#ifndef TEENY_OPS_H
#define TEENY_OPS_H

#include "../internal.h"

typedef enum {
#define XX(e, name, family, fn, attrs, grad) TEENY__OP_##e,
#include "ops.def"
#undef XX
    TEENY__OP_COUNT
} teeny__op_id;

/* Each op's attributes, typed; the attrs column of ops.def names the member
 * of teeny__op_attrs an op reads. Graph nodes store the union, so the graph
 * carries attributes without knowing any op. Fields are read by the family
 * file named in the comment. */
typedef struct { char unused; } teeny__none_attrs;                   /* add, mul, global_avgpool, softmax_ce */
typedef struct { teeny_act act; } teeny__activation_attrs;           /* elementwise.c */
typedef struct { float momentum, eps; } teeny__batchnorm_attrs;      /* batchnorm.c */
typedef struct { int kernel[2], stride[2], pad[2]; } teeny__pool2d_attrs; /* pool.c: [0] = H, [1] = W */
typedef struct { int out_features, has_bias; } teeny__linear_attrs;  /* linear.c */
typedef struct {
    int n_inputs;       /* 1..TEENY__OP_MAX_SLOTS, the node's inputs */
    int first_channel;  /* channel of y the first input lands on (0 in a graph) */
} teeny__concat_attrs;  /* concat.c */
typedef struct { int first_channel, count; } teeny__slice_attrs;     /* concat.c: y = x[:, first, first + count) */
typedef struct {
    int stride[2], pad[2], dilation[2], groups; /* [0] = H, [1] = W */
    teeny_act act;                              /* fused into the forward epilogue */
    int has_bias;                               /* 0 or 1 */
    int out_channels, kernel_h, kernel_w;       /* the weight's shape; read by infer only */
} teeny__conv2d_attrs;                          /* conv2d.c */
typedef struct { float scale; } teeny__attention_attrs;              /* attention.c */
typedef struct { int heads, key_dim; } teeny__psa_attrs;             /* psa.c */
typedef struct { int heads, height, width; } teeny__psa_merge_attrs; /* psa.c */

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
} teeny__op_attrs;

#define TEENY__OP_MAX_TENSORS 12
#define TEENY__OP_MAX_SLOTS 4 /* inputs, params, states or saved tensors of one node */

typedef struct {
    const teeny_tensor *in[TEENY__OP_MAX_TENSORS]; /* read */
    teeny_tensor *out[TEENY__OP_MAX_TENSORS];      /* written (incl. updated state); NULL: not wanted */
    teeny__op_attrs attrs;
    int training;                                  /* graph mode: 1 training, 0 inference */
} teeny__op_args;

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

/*
 * The op-table entry. forward and backward follow one tensor convention,
 * used by the eager API and the graph alike:
 *   forward:  in  = [inputs (n_in)..., params..., states...]
 *             out = [value, saved..., states...]   (states updated in place,
 *                                                 only in training mode)
 *   backward: in  = [inputs..., params..., states..., value, saved..., dvalue]
 *             out = [d_inputs (n_in)..., d_params...]; any may be NULL (not
 *             wanted); every one given is overwritten, never accumulated.
 * Ops never enqueue directly: they launch through teeny__launch and
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
} teeny__op;

extern const teeny__op teeny__ops[TEENY__OP_COUNT];

/* Check a table (teeny__ops, or a copy) of n entries: every required slot
 * set. TEENY_ERR_STATE, naming the first op and slot missing, if not. */
teeny_status teeny__ops_check(teeny_ctx *ctx, const teeny__op *table, int n);
const char *teeny__op_name(teeny__op_id id);

/* Entry points each family file defines, by the convention of ops.def. */
#define TEENY__OP_PROTO_GRAD(fn) teeny_status teeny__##fn##_backward(teeny_ctx *ctx, const teeny__op_args *a);
#define TEENY__OP_PROTO_NOGRAD(fn)
#define XX(e, name, family, fn, attrs, grad)                                   \
    teeny_status teeny__##fn##_infer(teeny_ctx *ctx, teeny__node_shapes *s);  \
    teeny_status teeny__##fn##_forward(teeny_ctx *ctx, const teeny__op_args *a); \
    TEENY__OP_PROTO_##grad(fn)
#include "ops.def"
#undef XX

/* Test hook (conv2d_plan.c): force a GEMM tile of the profile's list (-1:
 * by device and problem) and disable the depthwise kernels (1); not
 * thread-safe. A profile is forced through teeny__tune_force. */
void teeny__conv2d_debug(int tile, int no_depthwise);
/* Test hook (program/build.c): kernels report at most cap work-items (0: off), so
 * every fallback can be forced on any device; not thread-safe. */
void teeny__debug_kernel_wg_cap(size_t cap);
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
} teeny__attn_problem;
teeny_status teeny__attn_forward_run(teeny_ctx *ctx, const teeny__attn_problem *p);
teeny_status teeny__attn_backward_run(teeny_ctx *ctx, const teeny__attn_problem *p);

/* Optimizer state i (optim.c) for checkpoints: it belongs to parameter
 * *param_index of the optimizer, the tensor *param (borrowed), as its
 * *kind ("momentum_buffer", "exp_avg" or "exp_avg_sq"). TEENY_ERR_ARG for
 * an index out of range. */
teeny_status teeny__optimizer_state_param(const teeny_optimizer *o, int i, const teeny_tensor **param,
                                          int *param_index, const char **kind);

/* Add a node of op to a graph (graph.c): checks the inputs, runs the op's
 * infer, creates and initializes the node's parameters and state. Each
 * family's graph builders (teeny_graph_<op>) call it. */
teeny_status teeny__graph_node(teeny_graph *g, teeny__op_id op, const char *name, int n_in, const teeny_node *in,
                               const teeny__op_attrs *attrs, teeny_node *out);
/* The context a graph call reports its errors into (NULL for a NULL graph:
 * then the thread's context-less error). */
teeny_ctx *teeny__graph_ctx(const teeny_graph *g);

/* The first lines of every eager function: a live ctx, a cleared error. */
#define EAGER_BEGIN(fn)                                                             \
    if (!teeny__ctx_check(ctx))                                                     \
        return teeny__error(NULL, TEENY_ERR_ARG, fn ": ctx is NULL or destroyed"); \
    teeny__clear_error(ctx)

/* Run an op through the table (what the eager API does). */
static inline teeny_status teeny__op_run(teeny_ctx *ctx, teeny__op_id id, int backward, const teeny__op_args *a)
{
    teeny__op_fn fn = backward ? teeny__ops[id].backward : teeny__ops[id].forward;
    if (!fn)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "op %s has no %s pass", teeny__ops[id].name,
                            backward ? "backward" : "forward");
    /* the op owns the workspace it takes until it returns */
    ctx->op_depth++;
    teeny_status st = fn(ctx, a);
    if (--ctx->op_depth == 0)
        teeny__scratch_release_all(ctx);
    return st;
}

#endif
