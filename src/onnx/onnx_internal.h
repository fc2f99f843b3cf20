/*
 * onnx_internal.h -- what the ONNX importer's files share. The importer
 * walks a ModelProto (protobuf-c, generated from Debian's onnx.proto into
 * build/gen/onnx/) node by node and keeps one record per ONNX value name:
 * a host constant (initializers, Constant nodes, folded shape arithmetic),
 * a graph node (runtime values), or a graph input not used yet. Runtime
 * values keep their ONNX shape at the import batch B; the graph's own
 * shape of the node is that with dimension 0 divided by B (the graph
 * infers every node for a batch of 1 and scales dimension 0).
 *
 *   wire.c         bounded protobuf parsing (nesting depth, memory estimate)
 *   tensor_proto.c TensorProto -> host constant (typed fields, raw and external
 *                  data), feeds, the folding budget
 *   values.c       the value table, node names, errors, views
 *   attrs.c        attributes (typed, defaults, unknown ones refused), axes
 *   params.c       constants bound to graph parameters and state
 *   model.c        the model object's accessors, inspect_io
 *   import.c       the model: opset, inputs, the node loop through the op
 *                  registry (ops.def: one handler per op type), outputs
 * The handlers, by kind of op:
 *   fold.c         Constant, Shape, Squeeze/Unsqueeze, Reshape, Cast, ...
 *                  (folded, or views of run-time values)
 *   arith.c        Slice, Concat and Add/Sub/Mul/Div of constants
 *   scatter.c      ScatterND: folded, or Concat -> Gather at run time
 *   einsum.c       Einsum: a permutation, or transposes around one MatMul
 *   logic.c        comparisons, Not/And/Or/Xor, Mod, Where, Range, If
 *                  (folded: shape checks; If inlines its taken branch)
 *   pointwise.c    activations, broadcasting Add/Sub/Mul/Div/Pow, Sum
 *   reductions.c   ReduceSum/ReduceMean, Softmax/LogSoftmax, LayerNormalization,
 *                  InstanceNormalization, GroupNormalization
 *   ops_layout.c   Slice, Split, Gather, Expand, Pad, Concat
 *   transpose.c    Transpose (folded for constants), run-time values of
 *                  rank 6..8 ("wide": Reshape -> Transpose -> Reshape)
 *   layers.c       BatchNormalization, Gemm, MatMul, SoftmaxCrossEntropyLoss
 *   spatial.c      Conv, ConvTranspose, the pools, Resize/Upsample
 *   repeat.c       Tile (concat copies), CumSum (a triangular matmul)
 *   einsum.c       Einsum (reduce, transpose, views, matmul)
 *   attn_import.c  ONNX Attention and the attention core
 *   attn_fuse.c    the MatMul-Softmax-MatMul chains and batch norm +
 *                  activation pairs, found before the nodes import
 */
#ifndef TEENY_ONNX_INTERNAL_H
#define TEENY_ONNX_INTERNAL_H

#include "internal.h"
#include "graph/graph_internal.h"
#include "teenycl_onnx.h"
#include "onnx/onnx.pb-c.h"

#define OX_MAX_DIMS TEENY_ONNX_MAX_DIMS
#define OX_MAX_DEPTH 32            /* nested messages in a file */
#define OX_MIN_OPSET 6
#define OX_MAX_OPSET 24            /* 24: Attention's nonpad_kv_seqlen; the other ops' changes are new types */
#define OX_MAX_ELEMS INT32_MAX     /* elements in one tensor */

typedef struct {
    int ndim;
    int64_t d[OX_MAX_DIMS];
} ox_shape;

typedef enum { OX_F32, OX_I64 } ox_type;

/* A host tensor: fp32 or int64 data (integer and boolean ONNX types are
 * held as int64), numel elements (data NULL when 0). */
typedef struct {
    ox_type type;
    int onnx_type;                 /* TensorProto.DataType it came as */
    ox_shape shape;
    int64_t numel;
    void *data;                    /* owned */
} ox_const;

enum { OX_UNDEF, OX_CONST, OX_RUNTIME, OX_INPUT, OX_DEAD, OX_SIGMOID };

typedef struct {
    const char *name;              /* borrowed from the parsed model (or a feed) */
    int kind;
    ox_const c;                    /* OX_CONST (and a bound OX_INPUT); node: its graph constant once made */
    ox_shape shape;                /* OX_RUNTIME, OX_SIGMOID (x's): at the import batch */
    teeny_node node;               /* OX_RUNTIME */
    int is_i32;                    /* OX_RUNTIME: int32 labels */
    int is_loss;                   /* OX_RUNTIME: a [1] loss whatever the batch */
    int sigmoid_of;                /* OX_SIGMOID: the value x of sigmoid(x), fused into SiLU by Mul */
    int is_initializer;
    const Onnx__ValueInfoProto *vi;   /* OX_INPUT */
    const teeny_onnx_feed *feed;      /* OX_INPUT: the caller's value, or NULL */
    int param_uses;                /* parameter and state slots it fills */
    teeny_node bound_node;         /* param_uses > 0: the first slot it fills, which later ones share */
    int bound_slot, bound_state;
} ox_value;

typedef struct {
    char *name;
    teeny_node node;
    int slot;
} ox_param;

typedef struct {
    char *name;
    teeny_node node;               /* -1: constant */
    ox_shape shape;
    float *data;                   /* constant outputs, as fp32 */
    int declared;                  /* the element type the model declares, 0: none */
} ox_output;

typedef struct {
    char *name;
    teeny_node node;
    teeny_onnx_dtype dtype;
    int declared;                  /* the element type the model declares (float16 for a float16 input), 0: none */
} ox_input;

struct teeny_onnx_model {
    teeny_ctx *ctx;
    teeny_graph *g;
    int64_t batch;
    ox_input *inputs;
    int n_inputs, cap_inputs;
    ox_output *outputs;
    int n_outputs;
    ox_param *params;
    int n_params, cap_params;
};

/* The folding budget's caps (teenycl_onnx.h): TEENY_ONNX_FOLD_VALUE_BYTES
 * and TEENY_ONNX_FOLD_TOTAL_BYTES, or a test's (teeny__ox_load_budget). */
typedef struct {
    int64_t value_bytes, total_bytes;
} ox_budget;

typedef struct ox_import {
    teeny_ctx *ctx;
    teeny_graph *g;
    teeny_onnx_model *m;
    const teeny_onnx_params *p;
    const Onnx__GraphProto *graph;
    int64_t opset, batch;
    const char *dir;               /* external data; NULL: refused */
    ox_value *vals;
    int n_vals, cap_vals;
    int *hash;                     /* open addressing: value index + 1, 0 empty */
    int hash_cap;
    const Onnx__NodeProto *node;   /* the node being imported (messages) */
    int node_index;
    int n_names;                   /* graph node names made so far */
    int *defer;                    /* attn_fuse.c: per node, the final MatMul of its attention chain, or -1 */
    int *chain;                    /* attn_fuse.c: per final MatMul, its chain's node indices */
    int *fused_act;                /* attn_fuse.c: per batch norm or Conv node, the activation it absorbs (0: none) */
    int *absorbed_by;              /* attn_fuse.c: per Relu / Sigmoid / Mul node, its batch norm, or -1 */
    ox_budget budget;
    int64_t model_bytes;           /* host bytes of the model's own tensors: initializers, Constant values, feeds */
    int64_t model_largest;         /* the largest of them */
    int64_t folded_bytes;          /* host bytes of the values folded so far (teeny__ox_const_alloc) */
    /* import.c's: import im->node through its op type's handler (If's
     * branches call it for each node of the branch taken: a pointer, so
     * that no handler calls up into import.c) */
    teeny_status (*import_node)(struct ox_import *im);
} ox_import;

/* ---- wire.c ---- */
/* Unpack a message of desc from untrusted bytes: nesting deeper than
 * OX_MAX_DEPTH, malformed wire data or an unpacked size past the memory
 * estimate's limit fail with TEENY_ERR_FORMAT / TEENY_ERR_RANGE before
 * protobuf-c runs. Free with teeny__ox_free_unpacked. */
teeny_status teeny__ox_unpack(teeny_ctx *ctx, const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t size,
                       ProtobufCMessage **out);
void teeny__ox_free_unpacked(ProtobufCMessage *m);

/* ---- tensor_proto.c ---- */
void teeny__ox_const_free(ox_const *c);
int64_t teeny__ox_numel(const ox_shape *s);        /* -1 past OX_MAX_ELEMS */
/* A TensorProto into c (dir: where external data lives; NULL refuses it). */
teeny_status teeny__ox_tensor_load(teeny_ctx *ctx, const Onnx__TensorProto *t, const char *dir, const char *what,
                            ox_const *c);
/* A caller's feed into c. */
teeny_status teeny__ox_feed_load(teeny_ctx *ctx, const teeny_onnx_feed *f, ox_const *c);
/* Element i as double / int64 (either type). */
size_t teeny__ox_esize(ox_type t);                  /* 4 or 8 */
double teeny__ox_get_f(const ox_const *c, int64_t i);
int64_t teeny__ox_get_i(const ox_const *c, int64_t i);
/* An empty folded value of type and shape (data allocated, zeroed),
 * within the folding budget (teenycl_onnx.h: TEENY_ERR_NOMEM past it,
 * checked before anything is allocated). The error is set on the context;
 * the caller names the node (teeny__ox_fail). */
teeny_status teeny__ox_const_alloc(ox_import *im, ox_type type, int onnx_type, const ox_shape *s, ox_const *c);
/* Count c, one of the model's own tensors (an initializer, a Constant's
 * value, a feed), in what the folding budget allows. */
void teeny__ox_const_held(ox_import *im, const ox_const *c);
const char *teeny__ox_type_name(int onnx_type);
int teeny__ox_type_supported(int onnx_type);       /* float, float16 and integer types */
/* float or float16: the types held as fp32 (a float16 value is computed in fp32) */
int teeny__ox_is_float(int onnx_type);

/* ---- values.c ---- */
teeny_status teeny__ox_fail(ox_import *im, teeny_status st, const char *fmt, ...) TEENY__PRINTF(3, 4);
/* The element type a graph input's ValueInfoProto declares (a graph input's,
 * also once it is a run-time value); 0 for none or another value. */
int teeny__ox_declared_type(const ox_value *v);
/* A failed teeny_graph_* call, its message naming the node. */
teeny_status teeny__ox_graph_fail(ox_import *im, teeny_status st);
int teeny__ox_find(const ox_import *im, const char *name);
/* A new value record named name (TEENY_ERR_FORMAT when defined twice). */
teeny_status teeny__ox_define(ox_import *im, const char *name, int kind, int *idx);
/* The value of the node's input i: index, or -1 when omitted (""). An
 * input no earlier node produced is TEENY_ERR_FORMAT. */
teeny_status teeny__ox_in(ox_import *im, int i, int *idx);
/* teeny__ox_in for an input the node must have: a missing one (what names
 * it) fails with TEENY_ERR_FORMAT. */
teeny_status teeny__ox_in_present(ox_import *im, int i, const char *what, int *idx);
int teeny__ox_n_in(const ox_import *im);            /* inputs given, trailing omitted ones dropped */
/* Input i as a constant; what names the slot. A graph input with a feed
 * is bound to it when it is an integer tensor, or for a weight slot. */
teeny_status teeny__ox_in_const(ox_import *im, int i, const char *what, int weight, const ox_const **c);
/* Input i as a runtime fp32 value (a graph input becomes an input node). */
teeny_status teeny__ox_in_runtime(ox_import *im, int i, const char *what, int *idx);
/* Input i as int32 class labels [batch] (an int64/int32 graph input). */
teeny_status teeny__ox_in_labels(ox_import *im, int i, const char *what, int *idx);
/* Define the node's output i as a constant (takes c's data) or a runtime
 * node of ONNX shape s (checked against the graph's shape of the node). */
teeny_status teeny__ox_out_const(ox_import *im, int i, ox_const *c);
teeny_status teeny__ox_out_runtime(ox_import *im, int i, teeny_node node, const ox_shape *s);
/* The node's output count without trailing empty names; outputs past
 * `allowed` that are used fail as unsupported. */
teeny_status teeny__ox_outputs_at_most(ox_import *im, int allowed);
/* A runtime value viewed as ONNX shape s (no node when equal). */
teeny_status teeny__ox_view(ox_import *im, int idx, const ox_shape *s, teeny_node *out);
teeny_status teeny__ox_view_node(ox_import *im, teeny_node n, const ox_shape *from, const ox_shape *s, teeny_node *out);
/* A run-time value of rank 6..8 (transpose.c): its node holds the same
 * elements at a rank <= TEENY_MAX_DIMS; only Reshape and Transpose take
 * it (teeny__ox_in_runtime refuses it), and graph outputs. A graph input
 * of rank 6..8 is one too (values.c: its trailing dimensions merged). */
int teeny__ox_is_wide(const ox_value *v);
/* The graph's shape of a node at the import batch (dimension 0 times B). */
teeny_status teeny__ox_node_shape(ox_import *im, teeny_node n, ox_shape *s);
/* A unique graph node name for the node being imported (+ suffix). */
const char *teeny__ox_name(ox_import *im, const char *suffix, char *buf, size_t cap);
/* want (e.g. a PyTorch module name) when it is free and short, else teeny__ox_name. */
const char *teeny__ox_name_prefer(ox_import *im, const char *want, char *buf, size_t cap);

/* ---- attrs.c ----
 * Attributes: every attribute of the node must be in allowed (NULL-ended). */
teeny_status teeny__ox_attrs_allowed(ox_import *im, const char *const *allowed);
const Onnx__AttributeProto *teeny__ox_attr(const ox_import *im, const char *name);
teeny_status teeny__ox_attr_int(ox_import *im, const char *name, int64_t def, int64_t *out);
teeny_status teeny__ox_attr_float(ox_import *im, const char *name, float def, float *out);
teeny_status teeny__ox_attr_ints(ox_import *im, const char *name, int max, int64_t *out, int *n); /* *n -1: absent */
teeny_status teeny__ox_attr_string(ox_import *im, const char *name, const char *def, char *out, size_t cap);
/* An axis in [-rank, rank) normalized to [0, rank). */
teeny_status teeny__ox_axis(ox_import *im, const char *what, int64_t axis, int rank, int *out);

/* Bind constant c (value vidx's) to a parameter (is_state 0) or state slot
 * of node n: written into the tensor, named after the value, frozen when
 * the caller asked. data (the slot's element count) overrides c's values:
 * a transposed or broadcast copy. */
teeny_status teeny__ox_bind(ox_import *im, int vidx, teeny_node n, int is_state, int slot, const float *data);

/* ---- import.c ---- */
/* Import size bytes (dir: external data; fn: inspect mode, reporting each
 * node, the model destroyed at the end). */
teeny_status teeny__ox_load(teeny_ctx *ctx, const void *data, size_t size, const char *dir, const teeny_onnx_params *p,
                     teeny_onnx_report_fn fn, void *user, teeny_onnx_model **out);
/* teeny_onnx_load_memory with the folding budget's caps in place of the
 * header's: for tests of its rules at sizes that cost nothing. */
teeny_status teeny__ox_load_budget(teeny_ctx *ctx, const void *data, size_t size, const teeny_onnx_params *p,
                                   ox_budget budget, teeny_onnx_model **out);

/* ---- the op registry (ops.def): one handler per op type ---- */
typedef teeny_status (*ox_handler)(ox_import *im);
#define XX(type, fn, since, until) teeny_status teeny__ox_op_##fn(ox_import *im);
#include "ops.def"
#undef XX
#define OX_OP_COUNT 73             /* ops.def's lines: a line added or removed updates it, and README.md's table */

/* ---- fold.c, arith.c: folding ---- */
/* Folds for ops whose run-time form is a layer: Add/Sub/Mul/Div/Pow of two
 * constants, Concat of constants along any axis. */
teeny_status teeny__ox_fold_binary(ox_import *im, const ox_const *a, const ox_const *b);
teeny_status teeny__ox_fold_concat(ox_import *im, int axis);
teeny_status teeny__ox_fold_slice(ox_import *im);     /* arith.c: of constants */
/* Slice's starts/ends/axes/steps (inputs, or attributes before opset 10)
 * for data of shape s: per axis the first index (clamped as ONNX does),
 * the step, and the result's shape o. */
teeny_status teeny__ox_slice_params(ox_import *im, int rank, int64_t *start, int64_t *step, ox_shape *o,
                                    const ox_shape *s);
teeny_status teeny__ox_fold_gather(ox_import *im); /* fold.c: Gather of constants */
/* arith.c: NumPy broadcast of two ONNX shapes; 0 when they do not
 * broadcast. */
int teeny__ox_broadcast(const ox_shape *a, const ox_shape *b, ox_shape *o);
/* arith.c: element k of broadcast result shape o read from operand shape s
 * (teeny__ox_broadcast made o from s and the others). */
int64_t teeny__ox_bcast_index(const ox_shape *o, const ox_shape *s, int64_t k);
/* values.c: an int64 1-D constant (at most max values) as a list. */
teeny_status teeny__ox_const_ints(ox_import *im, const ox_const *c, const char *what, int max, int64_t *out, int *n);
/* A shape operand (Reshape, Expand, ConstantOfShape): const_ints, with more
 * than OX_MAX_DIMS values refused as a result of that rank. */
teeny_status teeny__ox_const_shape(ox_import *im, const ox_const *c, const char *what, int64_t *out, int *n);
/* TEENY_ERR_SHAPE naming the rank when a result of `rank` dimensions would
 * not fit an ox_shape: called before any dimension of it is written. */
teeny_status teeny__ox_rank_ok(ox_import *im, const char *what, int64_t rank);

/* ---- pointwise.c ---- */
/* Input i as a graph node and its ONNX shape: a run-time value, or a
 * float constant as a graph constant (made once; a scalar is [1]). */
teeny_status teeny__ox_operand(ox_import *im, int i, const char *what, teeny_node *n, ox_shape *s);

/* ---- spatial.c: Conv, ConvTranspose, the pools, Resize ---- */
typedef struct {
    int nsp;                       /* spatial dims: 1 or 2 */
    int64_t kernel[2], stride[2], pad[2], pad_end[2], dil[2];
} ox_spatial;
/* kernel_shape (unless kernel_given: sp->kernel holds it), strides,
 * dilations, pads or auto_pad for an input of spatial sizes in[]. */
teeny_status teeny__ox_spatial_attrs(ox_import *im, const int64_t *in, ox_spatial *sp, int kernel_given);
/* A run-time [N, C, L] value as [N, C, L, 1] (4-D as it is), and output
 * out from such a node (viewed back to 3-D when nsp is 1). */
teeny_status teeny__ox_as_2d(ox_import *im, int idx, teeny_node *n);
teeny_status teeny__ox_out_nd(ox_import *im, int out, teeny_node n, int nsp);

/* ---- attn_import.c: ONNX Attention and the core the fused pattern
 * (attn_fuse.c) shares ---- */
typedef struct {
    teeny_node q, k, v;            /* q [L..., S, D], k [Lk..., T, D], v [Lk..., T, Dv] */
    ox_shape qs, ks, vs;           /* one rank; Lk broadcasts to L */
    teeny_node mask;               /* additive fp32, broadcastable to [L..., S, T]; -1: none */
    ox_shape ms;
    float scale;
    float softcap;                 /* > 0: c tanh(x / c) on the scaled scores, before the masks */
    int causal;                    /* key j masked for query i when j > i + causal_offset */
    int64_t causal_offset;
    int want_scores;               /* the intermediate scores are wanted (decomposed) */
    int masked_zero;               /* decomposed: a row with every key masked gives 0 (the fused kernel's
                                    * rule, ONNX Attention's), not the plain softmax's NaN */
} ox_attn;

typedef struct {
    teeny_node y;                  /* [L..., S, Dv] */
    ox_shape ys;
    teeny_node raw, capped, biased, probs; /* want_scores: the scaled scores, after softcap, the masks, the softmax */
    ox_shape ss;                   /* their shape [L..., S, T] */
} ox_attn_out;
teeny_status teeny__ox_attention(ox_import *im, const ox_attn *a, ox_attn_out *o);
/* attn_fuse.c: find the MatMul-[Mul|Div]-[Add]-Softmax-MatMul chains
 * (before the nodes are imported); a chain's nodes but the last are
 * deferred (skipped), and at the last teeny__ox_fuse_node fuses them or
 * imports them as they are through import_one. */
teeny_status teeny__ox_fuse_scan(ox_import *im);
int teeny__ox_fuse_deferred(const ox_import *im, int i);
int teeny__ox_fuse_final(const ox_import *im, int i);
teeny_status teeny__ox_fuse_node(ox_import *im, ox_handler import_one);
/* attn_fuse.c, the same scan: node i's activation when it is a batch norm
 * or Conv that absorbs one (TEENY_ACT_RELU, TEENY_ACT_SILU, for a Conv
 * also TEENY_ACT_HARDSWISH and TEENY_ACT_CLIP; else TEENY_ACT_NONE), and
 * with its parameters (the Clip's: 0 and 6); whether node i is an
 * activation node absorbed so; for such a node (im->node), its output as
 * its producer's. */
int teeny__ox_act_of(const ox_import *im, int i);
teeny_act_params teeny__ox_act_params_of(const ox_import *im, int i);
int teeny__ox_act_absorbed(const ox_import *im, int i);
teeny_status teeny__ox_act_absorb(ox_import *im);

#endif
