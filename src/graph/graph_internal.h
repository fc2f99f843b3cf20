/*
 * graph_internal.h -- the graph's nodes and plans, shared by graph.c
 * (building), graph_compile.c (the compile phases), graph_plan.c (liveness
 * and memory), autograd.c (recording the backward pass), graph_run.c
 * (running plans) and the builders (builders.c, builders_spatial.c,
 * builders_layout.c: teeny_graph_<op>, attributes, then
 * teeny__graph_node()), so the executor never changes when an op is added.
 * The compile phases are declared here with their contracts so that
 * tests/test_graph.c can run each one on its own (tests link the static
 * library).
 */
#ifndef TEENY_GRAPH_INTERNAL_H
#define TEENY_GRAPH_INTERNAL_H

#include "internal.h"
#include "../ops/ops.h"

/* CONST: a value fixed when the graph is built (teeny_graph_constant):
 * graph-owned, no batch dimension, no gradient. */
typedef enum { TEENY__NODE_OP, TEENY__NODE_INPUT, TEENY__NODE_VIEW, TEENY__NODE_CONST } teeny__node_kind;

#define TEENY__NAME_CAP 96

/* A parameter slot of a node: where a tied slot's parameter lives. */
typedef struct {
    int node, slot;
} teeny__slot_ref;

typedef struct {
    teeny__node_kind kind;
    teeny__op_id op;                      /* TEENY__NODE_OP */
    char name[TEENY__NAME_CAP];
    int n_in;
    teeny_node in[TEENY__OP_MAX_SLOTS];
    int view_ndim;                        /* TEENY__NODE_VIEW: requested shape */
    int64_t view_shape[TEENY_MAX_DIMS];
    teeny__node_shapes shapes;            /* for a batch of 1 (checked when added) */
    teeny_tensor *param[TEENY__OP_MAX_SLOTS];
    teeny_tensor *param_grad[TEENY__OP_MAX_SLOTS];
    teeny_tensor *state[TEENY__OP_MAX_SLOTS];
    int is_output;
    int64_t batches_tracked;              /* counts_batches nodes: PyTorch's num_batches_tracked, per node */
    char *alias[2][TEENY__OP_MAX_SLOTS];  /* [0] param, [1] state: a full name replacing "<node>.<suffix>" */
    unsigned char frozen[TEENY__OP_MAX_SLOTS]; /* param slots that take no gradient */
    unsigned char tied[TEENY__OP_MAX_SLOTS];   /* param slots that share another slot's parameter (tie[]) */
    unsigned char shared[TEENY__OP_MAX_SLOTS]; /* param slots whose parameter some tied slot shares */
    teeny__slot_ref tie[TEENY__OP_MAX_SLOTS];  /* tied slots: the owner, a slot that is not itself tied */
    int fixed;                            /* TEENY__NODE_INPUT: dimension 0 is its own, not the batch */
    teeny_tensor *constant;               /* TEENY__NODE_CONST: its value (graph-owned) */
} teeny__gnode;

/* A name index (graph_names.c): open addressing over entries that name
 * their key indirectly (a node, a slot), so it survives the node array
 * moving. at[h]: entry + 1, 0 empty, -1 removed. */
typedef struct {
    int *at;
    int cap, used, live;                  /* used: live and removed entries */
} teeny__name_index;

/* A parameter (is_state 0) or state slot of a node. */
typedef struct {
    int node, is_state, slot;
} teeny__slot_pos;

struct teeny_graph {
    teeny_ctx *ctx;
    uint64_t rng;                         /* splitmix64 state for parameter init */
    teeny__gnode *nodes;
    int n_nodes, cap_nodes;
    teeny__name_index node_names;         /* every counted node's name */
    teeny__name_index slot_aliases;       /* every alias a slot carries */
    int n_plans;                          /* live plans */
    int64_t build_batch;                  /* the batch nodes are checked (and node_info reports) at */
    int64_t train_steps;
};

/* One planned buffer: a value, a saved tensor, a gradient or a temporary. */
typedef struct {
    size_t numel;
    int def, last;                        /* schedule steps */
    size_t offset;                        /* in the arena, elements */
} teeny__pbuf;

struct teeny_plan {
    teeny_graph *g;
    teeny_ctx *ctx;
    int64_t batch;
    int training;
    teeny_node loss;
    int reuse;
    teeny__node_shapes *shapes;           /* per node, resolved for this batch */
    teeny_tensor **value;                 /* per node */
    teeny_tensor *(*saved)[TEENY__OP_MAX_SLOTS];
    teeny_tensor **grad;                  /* per node: gradient of its value (training) */
    teeny_tensor **temps;                 /* accumulation temporaries: teeny__contrib.temp indexes them */
    int n_temps;
    teeny_tensor *arena;
    size_t peak_elems, no_reuse_elems;
    teeny__recorder *rec;
    int fwd_from, fwd_to, bwd_from, bwd_to, zero_from, zero_to;
    int frozen;                           /* teeny_plan_options.frozen_params: forwards see constant params */
    int64_t host_syncs;
    int forwarded;                        /* a forward has completed its enqueues: values exist */
    float loss_host;
    cl_event loss_event;
};

/* A node's backward step in the schedule (forward steps are 0..n-1). */
static inline int teeny__bwd_step(const teeny_graph *g, int node)
{
    return g->n_nodes + (g->n_nodes - 1 - node);
}

/* ---- graph.c: helpers shared by the graph files ---- */

/* Add a node of op to a graph: checks the inputs, runs the op's infer,
 * creates and initializes the node's parameters and state. Every graph
 * builder (builders*.c, teeny_graph_<op>) calls it. */
teeny_status teeny__graph_node(teeny_graph *g, teeny__op_id op, const char *name, int n_in, const teeny_node *in,
                               const teeny__op_attrs *attrs, teeny_node *out);
/* n >= 1 inputs concatenated by op (TEENY__OP_CONCAT, or TEENY__OP_CONCAT_AXIS
 * along axis): one node, or beyond TEENY__OP_MAX_SLOTS inputs a chain (the
 * first node takes 4 inputs, each later one the previous result plus up to
 * 3 more) whose nodes are named "<name>.part<k>", the last one carrying
 * name itself (automatic names when name is NULL or empty). *out = -1 on
 * failure. builders.c. */
teeny_status teeny__graph_concat_chain(teeny_graph *g, const char *name, teeny__op_id op, int axis, int n,
                                       const teeny_node *xs, teeny_node *out);
/* *out = -1 (out may be NULL) and TEENY_ERR_ARG, "<fn>: <what> is NULL":
 * a builder's NULL argument. builders.c. */
teeny_status teeny__graph_null_arg(teeny_graph *g, const char *fn, const char *what, teeny_node *out);
/* Append an empty node named name (or "<prefix><index>"; names are unique,
 * TEENY_ERR_ARG otherwise) at *idx; the caller fills it and counts it in
 * (teeny__graph_commit) once it is complete. */
teeny_status teeny__graph_push(teeny_graph *g, const char *name, const char *prefix, teeny__gnode **node, int *idx);

/* ---- graph_names.c: names found through indexes, not scans ---- */
/* Room in the node-name index for the node being pushed (TEENY_ERR_NOMEM). */
teeny_status teeny__graph_names_reserve(teeny_graph *g);
/* Count in the node teeny__graph_push made (g->n_nodes++), its name indexed. */
void teeny__graph_commit(teeny_graph *g);
void teeny__graph_names_free(teeny_graph *g);
/* The node named name, or -1. */
int teeny__graph_find(const teeny_graph *g, const char *name);
/* Set (or, alias NULL, drop) a slot's alias, taking ownership of alias
 * (freed on failure: TEENY_ERR_NOMEM); the old one is freed. */
teeny_status teeny__graph_alias_set(teeny_graph *g, int node, int is_state, int slot, char *alias);
/* An owned slot (teeny__graph_slot_owned) whose full name is name, other
 * than skip (NULL: none), of the kind want_state (0 parameters, 1 states,
 * -1 either): the first in node order, parameters first. 0 when none. */
int teeny__graph_find_slot(const teeny_graph *g, const char *name, const teeny__slot_pos *skip, int want_state,
                           teeny__slot_pos *out);
/* The context a graph call reports its errors into (NULL for a NULL graph:
 * then the thread's context-less error). */
teeny_ctx *teeny__graph_ctx(const teeny_graph *g);

teeny_status teeny__graph_check(const teeny_graph *g, const char *fn); /* g non-NULL; clears the last error */
/* A builder's first checks: teeny__graph_check, then out non-NULL (*out = -1). */
teeny_status teeny__graph_check_out(const teeny_graph *g, const char *fn, teeny_node *out);
teeny_status teeny__graph_check_node(const teeny_graph *g, teeny_node n, const char *what);
/* Element count, or -1 when a size is negative or the product passes
 * INT64_MAX (teeny__dims_product). */
int64_t teeny__shape_numel(const teeny__shape *s);
/* The shapes an op's infer gave node (its value, saved tensors when
 * with_saved, parameters and state) for batch: every size >= 1
 * (TEENY_ERR_SHAPE) and at most 2^31 - 1 elements each (TEENY_ERR_RANGE:
 * kernels index with int32). */
teeny_status teeny__check_node_shapes(teeny_ctx *ctx, const char *node, const teeny__node_shapes *s, int64_t batch,
                                      int with_saved);
const char *teeny__shape_text(const teeny__shape *s, char *buf, size_t cap);
/* Run node i's forward, or (backward 1) its backward with targets[j]
 * receiving the gradient of input j (NULL: not wanted) and ptargets[j]
 * that of parameter slot j (autograd.c: the parameter's gradient or a
 * tied parameter's temporary), on the plan's tensors laid out in its op's
 * slots (graph_plan.c); a failure names the node and its op. */
/* While recording: the launches that follow are node i's (its forward, or its backward: "NAME (backward)"),
 * as the profile reports them. */
teeny_status teeny__node_label(teeny_plan *p, int i, int backward);
teeny_status teeny__node_run(teeny_plan *p, int i, int backward, teeny_tensor *const *targets,
                             teeny_tensor *const *ptargets);
/* Resolve a view's requested shape (one -1 allowed) against numel elements. */
teeny_status teeny__view_shape(teeny_ctx *ctx, const char *name, int ndim, const int64_t *want, int64_t numel,
                               teeny__shape *out);
/* The node whose storage a value lives in (views share their input's). */
int teeny__graph_root(const teeny_graph *g, int i);

/* ---- hooks for importers (src/onnx/) ----
 * A parameter (is_state 0) or state (1) slot's full name, e.g. an ONNX
 * initializer's: it replaces "<node>.<suffix>" in teeny_graph_param /
 * teeny_graph_state and in checkpoints. Copied; 1..1023 characters, and
 * no other parameter or state of g may already carry it (TEENY_ERR_ARG). */
teeny_status teeny__graph_slot_alias(teeny_graph *g, teeny_node n, int is_state, int slot, const char *name);
/* Freeze (1) or unfreeze (0) a parameter slot: a frozen parameter does not
 * make its node take part in backward and teeny_graph_param reports its
 * grad as NULL (its node may still compute one when the node is on the
 * path of another parameter's gradient). Applies to plans compiled after. */
teeny_status teeny__graph_param_freeze(teeny_graph *g, teeny_node n, int slot, int frozen);
/* The batch nodes are inferred and checked at as they are added (1 unless
 * set), so node shapes (teeny_graph_node_info) are those of that batch: an
 * importer whose values only make sense at the model's batch (a reshape
 * that moves the batch inward, a constant whose leading dimension is
 * not the batch) builds at it. Only on an empty graph (TEENY_ERR_STATE
 * else); batch 1..2^31 - 1 (TEENY_ERR_ARG). */
teeny_status teeny__graph_set_build_batch(teeny_graph *g, int64_t batch);
/* An input as teeny_graph_input, or int32 (is_i32: class labels [batch,
 * d1, ...] of a cross-entropy over scores [batch, K, d1, ...];
 * teeny_graph_labels is the [batch] case), or fixed: every dimension fixed
 * (shape[0] is its own size, not the batch), a model input that does not
 * scale with the batch. */
teeny_status teeny__graph_input_as(teeny_graph *g, const char *name, int ndim, const int64_t *shape, int is_i32,
                                   int fixed, teeny_node *out);
/* A slot's full name: its alias, else "<node>.<suffix>" written into buf
 * (a tied parameter slot: its owner's). */
const char *teeny__graph_slot_name(const teeny_graph *g, int node, int is_state, int slot, char *buf, size_t cap);
/* A slot's tensor (a tied parameter slot: its owner's), or NULL when n has
 * no such slot. */
teeny_tensor *teeny__graph_slot_tensor(const teeny_graph *g, teeny_node n, int is_state, int slot);

/* ---- ties (graph_params.c; teeny_graph_tie_param by name) ----
 * Parameter slot `slot` of node n shares the parameter of owner's slot
 * owner_slot (or of the slot that one shares): one tensor (n's own is
 * destroyed), one gradient summed over every use, one name and index
 * (the owner's), one frozen flag (the owner's). Before any plan exists
 * (TEENY_ERR_STATE), equal shapes (TEENY_ERR_SHAPE); a slot that already
 * shares or is shared cannot be tied (TEENY_ERR_STATE). */
teeny_status teeny__graph_param_tie(teeny_graph *g, teeny_node n, int slot, teeny_node owner, int owner_slot);
/* The slot holding (node, slot)'s parameter: itself unless tied. */
teeny__slot_ref teeny__graph_param_root(const teeny_graph *g, int node, int slot);
/* Whether (node, slot) is a parameter (is_state 0) or state slot of an op
 * node with a tensor of its own: not a tied parameter slot. Parameter
 * enumeration, checkpoints and gradient zeroing visit only these
 * (graph_names.c). */
int teeny__graph_slot_owned(const teeny_graph *g, int node, int is_state, int slot);

/* ---- the backward pass a compile derives ----
 *
 * Node i's backward produces one gradient contribution per input slot j.
 * Where it goes is a tagged reference, not an encoded integer:
 *   NONE  the input takes no gradient (no parameter upstream of it, or node
 *         i is off the path from the parameters to the loss);
 *   GRAD  the first contribution to the input's gradient in backward order
 *         (from its latest consumer): written straight into that gradient,
 *         which it defines;
 *   TEMP  every later one (a value that fans out, or the same input in two
 *         slots): written into accumulation temporary `temp`, which is then
 *         added into the gradient, in a fixed order, so results are
 *         deterministic;
 *   ALIAS a GRAD of a node that passes its gradient through unchanged (a
 *         view, an ops.def PASS op such as add) where the input's gradient
 *         can be the node's own gradient buffer (grad_share): nothing is
 *         written, so no launch.
 * The number of temporaries is the number of TEMP contributions, so any
 * fan-in (a concat of many inputs, repeated inputs) gets exactly what it
 * needs. A node's parameter gradients are routed the same way (pcontrib):
 * GRAD into the parameter's gradient for the first use in backward order
 * (for an untied parameter, its only one), TEMP for every later use of a
 * tied parameter (slot order within a node), added into it. */
typedef enum { TEENY__CONTRIB_NONE, TEENY__CONTRIB_GRAD, TEENY__CONTRIB_TEMP, TEENY__CONTRIB_ALIAS } teeny__contrib_kind;

typedef struct {
    teeny__contrib_kind kind;
    int temp;                             /* TEENY__CONTRIB_TEMP: index into teeny_plan.temps; else -1 */
} teeny__contrib;

typedef struct {
    int *reaches;                         /* per node: on the path from a parameter to the loss */
    int *grad_def;                        /* per node: step that defines its gradient, -1 if it has none */
    int *grad_share;                      /* per node: the (later) node whose gradient buffer its gradient is, -1 */
    teeny__contrib *contrib;              /* per node and input slot: [i * TEENY__OP_MAX_SLOTS + j] */
    teeny__contrib *pcontrib;             /* per node and parameter slot, indexed as contrib */
    unsigned char *pwritten;              /* per owned parameter slot, indexed as contrib: a use writes its gradient */
    int n_temps;                          /* TEMP contributions: values' in backward order, then parameters' */
} teeny__backward;

/* ---- the memory plan: one buffer per arena-resident tensor ---- */
typedef struct {
    teeny__pbuf *bufs;
    int n, cap;
    int failed;                           /* an allocation failed: checked once after planning */
    int *value_buf;                       /* per node: its value's buffer; -1 (inputs and views) */
    int *saved_buf;                       /* per node and slot: saved tensor's buffer; -1 none */
    int *grad_buf;                        /* per node: its gradient's buffer (shared: grad_share); -1 none */
    int *temp_buf;                        /* per accumulation temporary (values' and parameters') */
} teeny__memplan;

/* ---- graph_compile.c: the phases of teeny_graph_compile, in order ---- */

/* A plan with its per-node arrays allocated and nothing else; *out NULL on
 * failure. Freed by teeny__plan_free (which also takes half-built plans). */
teeny_status teeny__plan_alloc(teeny_graph *g, int64_t batch, int training, teeny_node loss, int reuse,
                               teeny_plan **out);
void teeny__plan_free(teeny_plan *p);
/* Phase 1: shape inference for the plan's batch. */
teeny_status teeny__compile_shapes(teeny_plan *p);
/* Phase 2: backward derivation. */
teeny_status teeny__compile_backward(teeny_plan *p, teeny__backward *bw);
void teeny__backward_free(teeny__backward *bw);
/* Phase 4: recording (phase 3 is teeny__compile_memory, graph_plan.c). */
teeny_status teeny__compile_record(teeny_plan *p, const teeny__backward *bw);

/* ---- graph_plan.c: liveness and memory planning ---- */

teeny_status teeny__compile_liveness(const teeny_plan *p, const teeny__backward *bw, teeny__memplan *mp);
size_t teeny__plan_place(teeny__pbuf *b, int n, int reuse);
teeny_status teeny__compile_memory(teeny_plan *p, const teeny__backward *bw, teeny__memplan *mp);
void teeny__memplan_free(teeny__memplan *mp);

/* ---- autograd.c ---- */

/* Record the backward pass of training plan p (called by the recording
 * phase with recording on), writing each contribution where bw says. */
teeny_status teeny__autograd_plan(teeny_plan *p, const teeny__backward *bw);

#endif
