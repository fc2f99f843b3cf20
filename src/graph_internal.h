/*
 * graph_internal.h -- the graph's nodes and plans, shared by graph.c
 * (building, shape inference, planning, running) and autograd.c (deriving
 * the backward pass). Op families add their graph builders through
 * teeny__graph_node(), so the executor never changes when an op is added.
 */
#ifndef TEENY_GRAPH_INTERNAL_H
#define TEENY_GRAPH_INTERNAL_H

#include "internal.h"
#include "ops/ops.h"

typedef enum { TEENY__NODE_OP, TEENY__NODE_INPUT, TEENY__NODE_VIEW } teeny__node_kind;

#define TEENY__NAME_CAP 96

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
} teeny__gnode;

struct teeny_graph {
    teeny_ctx *ctx;
    uint64_t rng;                         /* splitmix64 state for parameter init */
    teeny__gnode *nodes;
    int n_nodes, cap_nodes;
    int n_plans;                          /* live plans */
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
    teeny_tensor **temps;                 /* accumulation temporaries */
    int n_temps;
    teeny_tensor *arena;
    size_t peak_elems, no_reuse_elems;
    teeny__recorder *rec;
    int fwd_from, fwd_to, bwd_from, bwd_to, zero_from, zero_to;
    int64_t host_syncs;
    int forwarded;                        /* a forward has completed its enqueues: values exist */
    float loss_host;
    cl_event loss_event;
};


/* autograd.c: record the backward pass of plan p (called by compile with
 * recording on); also computes gradient lifetimes for the planner. */
teeny_status teeny__autograd_plan(teeny_plan *p, int *needs_grad, int *reaches_loss);
/* A node's backward step in the schedule (forward steps are 0..n-1). */
static inline int teeny__bwd_step(const teeny_graph *g, int node)
{
    return g->n_nodes + (g->n_nodes - 1 - node);
}

#endif
