/*
 * teenycl_onnx.h -- importing ONNX models into a teeny_graph.
 *
 * An ONNX file (a ModelProto, parsed with protobuf-c from Debian's
 * onnx.proto) becomes a teeny_graph built through the same teeny_graph_*
 * builders an application calls: initializers become the graph's
 * parameters (and batch-norm statistics its state) under their ONNX names,
 * so teeny_graph_save / teeny_graph_load checkpoints use those names (an
 * initializer that feeds several nodes -- torch.export merges equal ones;
 * weight tying -- is one parameter shared by them, teeny_graph_tie_param:
 * one tensor, its gradient summed over the uses, one checkpoint entry;
 * uses that would hold it in different layouts, such as a Gemm with transB
 * and one without, or batch-norm statistics, are TEENY_ERR_UNSUPPORTED); the
 * graph inputs become graph inputs, whose first dimension is the batch; the
 * shape arithmetic exporters emit (Shape, Gather, Unsqueeze, Concat,
 * Reshape, Constant, ...) and their shape checks (Equal, Mod, Where, ...;
 * an If whose condition folds is replaced by its taken branch) are folded
 * at import for the batch given. The result compiles like a hand-built
 * graph, for inference or training.
 *
 * Supported: default-domain opsets 6..24. The ops and attributes the
 * importer maps are listed in README.md ("Importing ONNX models"); anything
 * else -- an op, an attribute or attribute value, an element type -- fails
 * with TEENY_ERR_UNSUPPORTED and a message naming the node, its op and the
 * attribute. The file is untrusted input: nesting depth, counts,
 * dimensions, data lengths and external-data references are checked before
 * use; malformed or truncated data gives TEENY_ERR_FORMAT, sizes past our
 * limits TEENY_ERR_RANGE, an unreadable file TEENY_ERR_IO. A failed import
 * leaves nothing behind (the graph it was building is destroyed).
 * Folding has a host memory budget (TEENY_ONNX_FOLD_VALUE_BYTES below),
 * checked before each folded value is allocated, so a few bytes of model
 * cannot make the importer fill gigabytes: a value past it is refused with
 * TEENY_ERR_NOMEM naming the node and the limit.
 * ONNX Attention and the unfused MatMul-Softmax-MatMul attention PyTorch
 * exports become the fused attention node where nothing masks the scores
 * (teeny_graph_node_info names it "<final node>.attention"); a bool
 * attn_mask must be a constant or a feed (teeny_onnx_feed has no bool
 * type: feed it as int64, nonzero meaning attend). In ONNX Attention a
 * query row whose every key is masked (-inf or false in attn_mask, by
 * is_causal, by nonpad_kv_seqlen) gives 0 in Y, and in the probabilities
 * of qk_matmul_output_mode 3, on every path: the fused kernel and the
 * decomposition alike, whatever the mask's rank and type (onnx 1.23's
 * reference; 1.22's gave NaN). Large finite mask values (-1e30,
 * -FLT_MAX) mask nothing: a row with the same such value on every key
 * gives the average of V, as the softmax defines. The MatMul-Softmax-
 * MatMul chain gives 0 there too where it becomes the fused kernel;
 * imported node by node, its Softmax keeps ONNX's NaN.
 *
 * float16 models: float16 initializers, Constant values, graph inputs and
 * outputs are held and computed in fp32 (every half converts exactly);
 * Cast to float16 rounds a value to half precision in place (round to
 * nearest even, as ONNX Runtime; TEENY_ACT_ROUND_HALF), Cast from float16
 * to float is an identity. teeny_onnx_input_declared and
 * teeny_onnx_output_declared report which inputs and outputs the model
 * declares float16.
 *
 * Example: run a model once at batch 8.
 *
 *     teeny_onnx_params op = TEENY_ONNX_PARAMS_INIT;
 *     op.batch = 8;
 *     teeny_onnx_model *m;
 *     if (teeny_onnx_load(ctx, "resnet18.onnx", &op, &m) != TEENY_OK) {
 *         fprintf(stderr, "%s\n", teeny_last_error(ctx));
 *         return 1;
 *     }
 *     teeny_plan_params pp = TEENY_PLAN_PARAMS_INIT;
 *     pp.batch = teeny_onnx_batch(m);
 *     pp.training = 0;
 *     teeny_plan *plan;
 *     teeny_graph_compile(teeny_onnx_graph(m), &pp, &plan);
 *     const char *name; teeny_node in; teeny_tensor *t;
 *     teeny_onnx_input(m, 0, &name, &in, NULL);
 *     teeny_plan_tensor(plan, in, &t);
 *     teeny_tensor_write(t, pixels, teeny_tensor_numel(t));
 *     teeny_plan_forward(plan);
 *     teeny_onnx_output_read(m, plan, 0, logits, 8 * 1000); // host sync
 *     teeny_plan_destroy(plan);
 *     teeny_onnx_destroy(m);              // destroys the graph too
 *
 * Fine-tuning: compile the graph with training = 1 and a loss node added
 * by the application (e.g. teeny_graph_softmax_cross_entropy on an output
 * node); every trainable initializer has a gradient (teeny_graph_param).
 *
 * Threads: a model is used by one thread at a time, like its context.
 */
#ifndef TEENYCL_ONNX_H
#define TEENYCL_ONNX_H

#include "teenycl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct teeny_onnx_model teeny_onnx_model;

/* The most dimensions an ONNX tensor the importer handles may have. A
 * graph input, initializer or Constant of higher rank, and any node whose
 * result would have it (Gather, Unsqueeze, Reshape, Expand, ...), fails
 * the load with TEENY_ERR_SHAPE, the message naming the node and the rank
 * (run-time values, in the graph, have ranks 0..5). */
#define TEENY_ONNX_MAX_DIMS 8

/* ONNX element types (TensorProto.DataType values) of feeds and inputs.
 * Values are only ever appended. TEENY_ONNX_FLOAT16: IEEE half, as
 * uint16_t bit patterns (teeny_half_to_float converts). */
typedef enum {
    TEENY_ONNX_FLOAT = 1, TEENY_ONNX_INT32 = 6, TEENY_ONNX_INT64 = 7, TEENY_ONNX_FLOAT16 = 10
} teeny_onnx_dtype;

/* A value for a graph input known at import. An input that the importer
 * can only take as a constant -- a weight, a shape or axes operand, an
 * integer tensor other than class labels -- takes its feed's value (as an
 * initializer would; a weight becomes a parameter named after the input);
 * every other input stays a graph input, whose value the application
 * writes into the plan, and the feed only sets its shape where the model
 * leaves dimensions open. A feed must match what the model declares: its
 * rank and fixed dimensions (else TEENY_ERR_SHAPE) and float or float16
 * for a float or float16 input (a TEENY_ONNX_FLOAT16 feed's halves
 * convert exactly), an integer type for an integer or bool one (else
 * TEENY_ERR_ARG);
 * the message names the input's declared type and shape and the feed's
 * ("(input: float [?, 3]; feed: int64 [2, 4])"). A rank-0 input takes a
 * feed of rank 0 (ndim 0, one value). Borrowed for the duration of the
 * load call. */
typedef struct {
    const char *name;      /* the graph input's name */
    teeny_onnx_dtype dtype;
    int ndim;              /* 0..TEENY_ONNX_MAX_DIMS */
    const int64_t *shape;  /* ndim sizes >= 0 */
    const void *data;      /* the product of shape values of dtype, C order */
} teeny_onnx_feed;

typedef struct {
    int64_t batch;         /* the size of every graph input's first dimension; 0: the first graph input's own
                              (1 where it is symbolic). A fixed first dimension that differs: TEENY_ERR_SHAPE */
    int freeze;            /* 1: every parameter starts frozen (no gradient; see teeny_onnx_set_trainable) */
    const char *base_dir;  /* teeny_onnx_load_memory: the directory external data files are read from
                              (NULL: a model with external data fails with TEENY_ERR_UNSUPPORTED);
                              teeny_onnx_load ignores it and uses the model file's directory */
    int n_feeds;           /* >= 0 */
    const teeny_onnx_feed *feeds; /* n_feeds entries, or NULL when n_feeds is 0 */
} teeny_onnx_params;
#define TEENY_ONNX_PARAMS_INIT { 0, 0, NULL, 0, NULL }

/* The folding budget. Constants the importer computes on the host (the
 * shape arithmetic, ConstantOfShape, Cast, Gather, Reshape, Identity, ...
 * of constants) live in host memory until the import ends, 4 bytes an
 * element for float and 8 for the integer types (held as int64). Before
 * one is allocated it must fit
 *   - one value: at most TEENY_ONNX_FOLD_VALUE_BYTES (256 MiB: 64 Mi
 *     floats, room for any shape computation and a [1, 1, 8192, 8192]
 *     float mask) or the model's own largest tensor (an initializer, a
 *     Constant's value, a feed), whichever is larger: a weight passed
 *     through Identity or Reshape is folded at its own size;
 *   - all folded values together: at most TEENY_ONNX_FOLD_TOTAL_BYTES
 *     (1 GiB) plus twice the bytes of the model's own tensors.
 * A value past either is refused with TEENY_ERR_NOMEM naming the node, its
 * size and the limit. */
#define TEENY_ONNX_FOLD_VALUE_BYTES ((int64_t)256 << 20)
#define TEENY_ONNX_FOLD_TOTAL_BYTES ((int64_t)1 << 30)

/* Import the model at path (p NULL: TEENY_ONNX_PARAMS_INIT) into a new
 * graph of ctx. External data files (TensorProto.external_data) are read
 * from the model's directory; a location that is absolute, has a ".."
 * component or resolves (through symlinks) outside that directory is
 * refused with TEENY_ERR_FORMAT, a missing file is TEENY_ERR_IO. Caller
 * frees *out with teeny_onnx_destroy; *out is NULL on failure, with the
 * details in teeny_last_error(ctx) (ctx NULL: TEENY_ERR_ARG, in
 * teeny_last_error(NULL)). */
TEENY_API teeny_status teeny_onnx_load(teeny_ctx *ctx, const char *path, const teeny_onnx_params *p,
    teeny_onnx_model **out);
/* The same from size bytes at data (copied as needed; data is borrowed for
 * the call only). External data comes from p->base_dir. */
TEENY_API teeny_status teeny_onnx_load_memory(teeny_ctx *ctx, const void *data, size_t size,
    const teeny_onnx_params *p, teeny_onnx_model **out);
/* Destroys the model and its graph; destroy the graph's plans first. NULL
 * is a no-op. */
TEENY_API void teeny_onnx_destroy(teeny_onnx_model *m);

/* The imported graph (borrowed; lives as long as m). Applications may add
 * nodes to it (a loss, a head) and compile it. */
TEENY_API teeny_graph *teeny_onnx_graph(const teeny_onnx_model *m);
/* The batch the model was imported for: compile plans with it (shapes the
 * exporter computed from the batch were folded for it). 0 for NULL. */
TEENY_API int64_t teeny_onnx_batch(const teeny_onnx_model *m);

/* The graph inputs the plan needs values for, in the model's order (inputs
 * taken as constants, and unused ones, are not listed). name is borrowed
 * (lives as long as m); node is the graph's input node; dtype is
 * TEENY_ONNX_FLOAT (an fp32 input, also for a float16 one:
 * teeny_onnx_input_declared tells them apart) or TEENY_ONNX_INT32 (class labels: the
 * plan's tensor is int32, whether the model declares int32 or int64). A
 * rank-0 input (a scalar) is a plan tensor of shape [1], as the library's
 * other scalars are. Any out pointer may be NULL. TEENY_ERR_ARG for an
 * index out of range. */
TEENY_API int teeny_onnx_input_count(const teeny_onnx_model *m);
TEENY_API teeny_status teeny_onnx_input(const teeny_onnx_model *m, int i, const char **name, teeny_node *node,
    teeny_onnx_dtype *dtype);
/* The element type plan input i (teeny_onnx_input's index) or graph
 * output i (teeny_onnx_output's) declares in the model (its
 * ValueInfoProto's TensorProto.DataType: 1 float, 10 float16, 6 int32, 7
 * int64, ...; 0 when the model declares none), into *elem_type (may be
 * NULL). A float16 input or output is computed in fp32: its plan tensor
 * is fp32 (teeny_onnx_input reports TEENY_ONNX_FLOAT) and
 * teeny_onnx_output_read gives fp32 values, not rounded to half; round
 * them with teeny_round_half or teeny_float_to_half where the declared
 * type matters (teeny-run writes a float16 output as '<f2', so rounded).
 * TEENY_ERR_ARG for an index out of range. */
TEENY_API teeny_status teeny_onnx_input_declared(const teeny_onnx_model *m, int i, int *elem_type);
TEENY_API teeny_status teeny_onnx_output_declared(const teeny_onnx_model *m, int i, int *elem_type);

/* The graph outputs in the model's order: name (borrowed), the node that
 * holds the value (marked as a graph output; -1 when the output was folded
 * to a constant at import), and its ONNX shape at the import batch (ndim
 * 0..TEENY_ONNX_MAX_DIMS; shape needs room for TEENY_ONNX_MAX_DIMS). Any
 * out pointer may be NULL. */
TEENY_API int teeny_onnx_output_count(const teeny_onnx_model *m);
TEENY_API teeny_status teeny_onnx_output(const teeny_onnx_model *m, int i, const char **name, teeny_node *node,
    int *ndim, int64_t *shape);
/* Host sync: copy output i (count == its element count) as fp32 into dst,
 * from plan (after a forward; a plan of m's graph) or, for a folded
 * output, from the constant (plan may then be NULL). Integer constants
 * are converted to float; a float16 output's fp32 value is not rounded to
 * half (teeny_round_half does that). */
TEENY_API teeny_status teeny_onnx_output_read(const teeny_onnx_model *m, teeny_plan *plan, int i, float *dst,
    size_t count);

/* Make the parameter imported from initializer (or feed) `name` trainable
 * (1) or frozen (0): a frozen parameter gets no gradient (teeny_graph_param
 * reports grad NULL), so an optimizer built from the gradients leaves it
 * alone. Affects plans compiled afterwards. TEENY_ERR_ARG when no
 * parameter has that name. Batch-norm running statistics are state, never
 * trainable. */
TEENY_API teeny_status teeny_onnx_set_trainable(teeny_onnx_model *m, const char *name, int trainable);

/* What teeny_onnx_inspect reports for each node, in model order. */
typedef struct {
    int index;             /* the node's position in the graph */
    const char *name;      /* the node's name ("" when it has none) */
    const char *op_type;
    teeny_status status;   /* TEENY_OK: imported; else why not (TEENY_ERR_UNSUPPORTED mostly) */
    const char *message;   /* "" when imported; else the reason, naming the attribute */
} teeny_onnx_node_report;
typedef void (*teeny_onnx_report_fn)(const teeny_onnx_node_report *r, void *user_data);

/* Import the model at path as teeny_onnx_load does, but go on past the
 * nodes that fail (their results are marked unavailable; nodes that use
 * them report so) and call fn once per node; the graph is then destroyed.
 * Every pointer in a report is valid during the call only. Returns
 * TEENY_OK when every node imports, the first node's failure status
 * otherwise, or the model-level error (a malformed file, an unsupported
 * opset: no node is reported then). */
TEENY_API teeny_status teeny_onnx_inspect(teeny_ctx *ctx, const char *path, const teeny_onnx_params *p,
    teeny_onnx_report_fn fn, void *user_data);

/* What teeny_onnx_inspect_io reports for each graph input and output, as
 * the file declares it (its ValueInfoProto), before any import. */
typedef struct {
    int is_output;              /* 0: a graph input, 1: a graph output */
    int index;                  /* its place among the model's inputs (initializers not counted) or outputs */
    const char *name;
    int elem_type;              /* TensorProto.DataType: 1 float, 6 int32, 7 int64, 9 bool, ...;
                                   0 when not declared or not a tensor */
    const char *elem_type_name; /* "float", "int64", "bool", ...; "undefined"; "not a tensor" (a sequence, a map) */
    int ndim;                   /* the declared rank (any, even past TEENY_ONNX_MAX_DIMS); -1: no shape declared */
    const int64_t *dims;        /* ndim sizes; -1 for a dimension that is symbolic or unknown */
    const char *const *dim_names; /* ndim names: a symbolic dimension's (dim_param, e.g. "batch"), else "" */
} teeny_onnx_io_report;
typedef void (*teeny_onnx_io_fn)(const teeny_onnx_io_report *r, void *user_data);

/* Read the model at path and call fn once per graph input that is not an
 * initializer, in the model's order, then once per graph output. Nothing
 * is imported and no graph is built, so a model that does not import (an
 * unsupported op, a symbolic dimension that needs a feed) is described
 * too. Every pointer in a report is valid during the call only. Returns
 * TEENY_OK, or: TEENY_ERR_ARG (ctx, path or fn NULL), TEENY_ERR_IO (the
 * file cannot be read), TEENY_ERR_FORMAT (not an ONNX model: the message
 * says so, with the protobuf parser's reason, or the model has no graph),
 * TEENY_ERR_RANGE (past the importer's size limits), TEENY_ERR_NOMEM;
 * the details in teeny_last_error(ctx). */
TEENY_API teeny_status teeny_onnx_inspect_io(teeny_ctx *ctx, const char *path, teeny_onnx_io_fn fn,
    void *user_data);

/* The ONNX ops the importer maps (its op registry, src/onnx/ops.def; the
 * table in README.md, "Importing ONNX models", says what each becomes and
 * its limits): teeny_onnx_op_count() of them, each a default-domain op
 * type ("" or "ai.onnx") and the opsets its mapping takes (within the
 * model-wide 6..24). Entry i's op_type is a static string ("Conv",
 * "MatMul", ...); any out pointer may be NULL. The entries stay in one
 * order for a given library; no two share an op type. TEENY_ERR_ARG for
 * an index outside 0..count-1, in teeny_last_error(NULL). Needs no
 * context; safe from any thread. */
TEENY_API int teeny_onnx_op_count(void);
TEENY_API teeny_status teeny_onnx_op_info(int i, const char **op_type, int *since_opset, int *until_opset);

#ifdef __cplusplus
}
#endif
#endif /* TEENYCL_ONNX_H */
