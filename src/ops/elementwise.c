/*
 * elementwise.c -- y = a + b, y = a * b and activations (ReLU, SiLU) with
 * their gradients. Tensors of any shape; only element counts must agree.
 * Kernels: cl/elementwise.cl, one work-item per element, or in the CPU
 * variant (ctx->tune.variant) a run of EW_RUN elements in float16 vectors
 * for add and the activations.
 *
 * Op-table entries (the convention of ops.h):
 *   add:        forward in = [a, b], out = [y];
 *               backward in = [a, b, y, dy], out = [da, db] (copies of dy)
 *   activation: attrs.activation.act; forward in = [x], out = [y];
 *               backward in = [x, y, dy], out = [dx]
 *   mul:        forward in = [a, b], out = [y];
 *               backward in = [a, b, y, dy], out = [da = dy * b, db = dy * a]
 */
#include <string.h>

#include "ops.h"

/* The CPU variants (TEENY_VARIANT_CPU) of add and the activations take a
 * run of EW_RUN elements per work-item (cl/elementwise.cl). */
#define EW_RUN 2048

static int cpu_variant(const teeny_ctx *ctx)
{
    return ctx->tune.variant == TEENY_VARIANT_CPU;
}

/* One work-item per element, or per EW_RUN of them (cpu: a CPU variant). */
static teeny_status ew_launch(teeny_ctx *ctx, const char *name, int n, int cpu, cl_kernel k)
{
    size_t global = (size_t)n, local;
    if (cpu) {
        global = (size_t)(n / EW_RUN + (n % EW_RUN != 0));
        local = teeny__local_clamp(ctx, k, name, teeny__cpu_local(ctx, global));
    } else {
        local = teeny__local_clamp(ctx, k, name, (size_t)ctx->work_group_size);
    }
    return teeny__launch(ctx, k, name, 1, &global, &local);
}

static teeny_status check_act(teeny_ctx *ctx, teeny_act act)
{
    if (act != TEENY_ACT_NONE && act != TEENY_ACT_RELU && act != TEENY_ACT_SILU)
        return teeny__error(ctx, TEENY_ERR_ARG, "unknown activation %d", (int)act);
    return TEENY_OK;
}

static teeny_status act_launch(teeny_ctx *ctx, int act, const teeny_tensor *x, teeny_tensor *y);

teeny_status teeny__add_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x0 = a->in[TEENY__ADD_A], *x1 = a->in[TEENY__ADD_B];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int n = (int)y->numel, o0 = teeny__off(x0), o1 = teeny__off(x1), oy = teeny__off(y);
    const char *name = cpu_variant(ctx) ? "ew_add_cpu" : "ew_add";
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "elementwise", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x0->buf, sizeof o0, &o0, sizeof(cl_mem), &x1->buf,
                             sizeof o1, &o1, sizeof(cl_mem), &y->buf, sizeof oy, &oy, sizeof n, &n, (size_t)0);
    if (st == TEENY_OK)
        st = ew_launch(ctx, name, n, cpu_variant(ctx), k);
    return st;
}

teeny_status teeny__add_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny_status st = TEENY_OK;
    for (int i = TEENY__ADD_A; i <= TEENY__ADD_B && st == TEENY_OK; i++)
        if (a->out[i])
            st = act_launch(ctx, TEENY_ACT_NONE, a->in[TEENY__ADD_DY], a->out[i]);
    return st;
}

teeny_status teeny__activation_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    return act_launch(ctx, (int)a->attrs.activation.act, a->in[TEENY__ACTIVATION_X], a->out[TEENY__OUT_VALUE]);
}

static teeny_status act_launch(teeny_ctx *ctx, int act, const teeny_tensor *x, teeny_tensor *y)
{
    int n = (int)y->numel, ox = teeny__off(x), oy = teeny__off(y);
    const char *name = cpu_variant(ctx) ? "ew_act_forward_cpu" : "ew_act_forward";
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "elementwise", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof act, &act, sizeof(cl_mem), &x->buf, sizeof ox, &ox,
                             sizeof(cl_mem), &y->buf, sizeof oy, &oy, sizeof n, &n, (size_t)0);
    if (st == TEENY_OK)
        st = ew_launch(ctx, name, n, cpu_variant(ctx), k);
    return st;
}

teeny_status teeny__activation_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__ACTIVATION_X], *dy = a->in[TEENY__ACTIVATION_DY];
    teeny_tensor *dx = a->out[TEENY__ACTIVATION_X];
    int act = (int)a->attrs.activation.act;
    int n = (int)dx->numel, ox = teeny__off(x), ody = teeny__off(dy), odx = teeny__off(dx);
    const char *name = cpu_variant(ctx) ? "ew_act_backward_cpu" : "ew_act_backward";
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "elementwise", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof act, &act, sizeof(cl_mem), &x->buf, sizeof ox, &ox,
                             sizeof(cl_mem), &dy->buf, sizeof ody, &ody, sizeof(cl_mem), &dx->buf, sizeof odx, &odx,
                             sizeof n, &n, (size_t)0);
    if (st == TEENY_OK)
        st = ew_launch(ctx, name, n, cpu_variant(ctx), k);
    return st;
}

teeny_status teeny__mul_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x0 = a->in[TEENY__MUL_A], *x1 = a->in[TEENY__MUL_B];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    int n = (int)y->numel, o0 = teeny__off(x0), o1 = teeny__off(x1), oy = teeny__off(y);
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "elementwise", "", "ew_mul", &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, "ew_mul", sizeof(cl_mem), &x0->buf, sizeof o0, &o0, sizeof(cl_mem), &x1->buf,
                             sizeof o1, &o1, sizeof(cl_mem), &y->buf, sizeof oy, &oy, sizeof n, &n, (size_t)0);
    if (st == TEENY_OK)
        st = ew_launch(ctx, "ew_mul", n, 0, k);
    return st;
}

teeny_status teeny__mul_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x0 = a->in[TEENY__MUL_A], *x1 = a->in[TEENY__MUL_B], *dy = a->in[TEENY__MUL_DY];
    teeny_tensor *da = a->out[TEENY__MUL_A], *db = a->out[TEENY__MUL_B];
    /* a missing output gets dy's buffer as a stand-in the kernel never writes */
    cl_mem da_buf = da ? da->buf : dy->buf, db_buf = db ? db->buf : dy->buf;
    int n = (int)dy->numel, o0 = teeny__off(x0), o1 = teeny__off(x1), ody = teeny__off(dy);
    int oda = da ? teeny__off(da) : 0, odb = db ? teeny__off(db) : 0, has_da = da != NULL, has_db = db != NULL;
    cl_kernel k;
    teeny_status st;
    if (!da && !db)
        return TEENY_OK;
    st = teeny__kernel_get(ctx, "elementwise", "", "ew_mul_backward", &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, "ew_mul_backward", sizeof(cl_mem), &x0->buf, sizeof o0, &o0, sizeof(cl_mem),
                             &x1->buf, sizeof o1, &o1, sizeof(cl_mem), &dy->buf, sizeof ody, &ody, sizeof(cl_mem),
                             &da_buf, sizeof oda, &oda, sizeof has_da, &has_da, sizeof(cl_mem), &db_buf, sizeof odb,
                             &odb, sizeof has_db, &has_db, sizeof n, &n, (size_t)0);
    if (st == TEENY_OK)
        st = ew_launch(ctx, "ew_mul_backward", n, 0, k);
    return st;
}

/* ---- eager API ---- */

teeny_status teeny_add(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, teeny_tensor *y)
{
    teeny_status st;
    EAGER_BEGIN("teeny_add");
    if ((st = teeny__check_tensor(ctx, a, "teeny_add: a")) != TEENY_OK ||
        (st = teeny__check_tensor(ctx, b, "teeny_add: b")) != TEENY_OK ||
        (st = teeny__check_tensor(ctx, y, "teeny_add: y")) != TEENY_OK ||
        (st = teeny__check_same_numel(ctx, a, "teeny_add: a", b, "b")) != TEENY_OK ||
        (st = teeny__check_same_numel(ctx, a, "teeny_add: a", y, "y")) != TEENY_OK)
        return st;
    if ((st = teeny__check_alias(ctx, y, "teeny_add: y", a, "a", 1)) != TEENY_OK ||
        (st = teeny__check_alias(ctx, y, "teeny_add: y", b, "b", 1)) != TEENY_OK)
        return st;
    teeny__op_args args = {.in = {a, b}, .out = {y}};
    return teeny__op_run(ctx, TEENY__OP_ADD, 0, &args);
}

teeny_status teeny_activation_forward(teeny_ctx *ctx, teeny_act act, const teeny_tensor *x, teeny_tensor *y)
{
    teeny_status st;
    EAGER_BEGIN("teeny_activation_forward");
    if ((st = check_act(ctx, act)) != TEENY_OK ||
        (st = teeny__check_tensor(ctx, x, "teeny_activation_forward: x")) != TEENY_OK ||
        (st = teeny__check_tensor(ctx, y, "teeny_activation_forward: y")) != TEENY_OK ||
        (st = teeny__check_same_numel(ctx, x, "teeny_activation_forward: x", y, "y")) != TEENY_OK)
        return st;
    if ((st = teeny__check_alias(ctx, y, "teeny_activation_forward: y", x, "x", 1)) != TEENY_OK)
        return st;
    teeny__op_args args = {.in = {x}, .out = {y}, .attrs.activation = {act}};
    return teeny__op_run(ctx, TEENY__OP_ACTIVATION, 0, &args);
}

teeny_status teeny_activation_backward(teeny_ctx *ctx, teeny_act act, const teeny_tensor *x, const teeny_tensor *dy,
                                       teeny_tensor *dx)
{
    teeny_status st;
    EAGER_BEGIN("teeny_activation_backward");
    if ((st = check_act(ctx, act)) != TEENY_OK ||
        (st = teeny__check_tensor(ctx, x, "teeny_activation_backward: x")) != TEENY_OK ||
        (st = teeny__check_tensor(ctx, dy, "teeny_activation_backward: dy")) != TEENY_OK ||
        (st = teeny__check_tensor(ctx, dx, "teeny_activation_backward: dx")) != TEENY_OK ||
        (st = teeny__check_same_numel(ctx, x, "teeny_activation_backward: x", dy, "dy")) != TEENY_OK ||
        (st = teeny__check_same_numel(ctx, x, "teeny_activation_backward: x", dx, "dx")) != TEENY_OK)
        return st;
    if ((st = teeny__check_alias(ctx, dx, "teeny_activation_backward: dx", x, "x", 1)) != TEENY_OK ||
        (st = teeny__check_alias(ctx, dx, "teeny_activation_backward: dx", dy, "dy", 1)) != TEENY_OK)
        return st;
    teeny__op_args args = {.in = {x, NULL, dy}, .out = {dx}, .attrs.activation = {act}};
    return teeny__op_run(ctx, TEENY__OP_ACTIVATION, 1, &args);
}

teeny_status teeny_mul(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, teeny_tensor *y)
{
    teeny_status st;
    EAGER_BEGIN("teeny_mul");
    if ((st = teeny__check_tensor(ctx, a, "teeny_mul: a")) != TEENY_OK ||
        (st = teeny__check_tensor(ctx, b, "teeny_mul: b")) != TEENY_OK ||
        (st = teeny__check_tensor(ctx, y, "teeny_mul: y")) != TEENY_OK ||
        (st = teeny__check_same_numel(ctx, a, "teeny_mul: a", b, "b")) != TEENY_OK ||
        (st = teeny__check_same_numel(ctx, a, "teeny_mul: a", y, "y")) != TEENY_OK)
        return st;
    if ((st = teeny__check_alias(ctx, y, "teeny_mul: y", a, "a", 1)) != TEENY_OK ||
        (st = teeny__check_alias(ctx, y, "teeny_mul: y", b, "b", 1)) != TEENY_OK)
        return st;
    teeny__op_args args = {.in = {a, b}, .out = {y}};
    return teeny__op_run(ctx, TEENY__OP_MUL, 0, &args);
}

teeny_status teeny_mul_backward(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, const teeny_tensor *dy,
                                teeny_tensor *da, teeny_tensor *db)
{
    static const char fn[] = "teeny_mul_backward";
    const teeny_tensor *ins[3] = {a, b, dy};
    const char *in_names[3] = {"a", "b", "dy"};
    teeny_tensor *outs[2] = {da, db};
    const char *out_names[2] = {"da", "db"};
    teeny_status st;
    EAGER_BEGIN("teeny_mul_backward");
    for (int i = 0; i < 3; i++)
        if ((st = teeny__check_tensor(ctx, ins[i], in_names[i])) != TEENY_OK)
            return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    for (int i = 0; i < 2; i++)
        if ((st = teeny__check_same_numel(ctx, dy, "dy", ins[i], in_names[i])) != TEENY_OK)
            return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    for (int j = 0; j < 2; j++) {
        if (!outs[j])
            continue;
        if ((st = teeny__check_tensor(ctx, outs[j], out_names[j])) != TEENY_OK ||
            (st = teeny__check_same_numel(ctx, dy, "dy", outs[j], out_names[j])) != TEENY_OK)
            return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
        for (int i = 0; i < 3; i++)
            if ((st = teeny__check_alias(ctx, outs[j], out_names[j], ins[i], in_names[i], 1)) != TEENY_OK)
                return teeny__error(ctx, st, "%s: %s", fn, teeny_last_error(ctx));
    }
    if (teeny__overlap(da, db))
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: da overlaps db in memory", fn);
    teeny__op_args args = {.in = {a, b, NULL, dy}, .out = {da, db}};
    return teeny__op_run(ctx, TEENY__OP_MUL, 1, &args);
}

/* Graph shapes: same-shape inputs and output. */
teeny_status teeny__add_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    if (s->in[0].ndim != s->in[1].ndim ||
        memcmp(s->in[0].shape, s->in[1].shape, sizeof(int64_t) * (size_t)s->in[0].ndim))
        return teeny__error(ctx, TEENY_ERR_SHAPE, "add: the two inputs differ in shape");
    s->out = s->in[0];
    return TEENY_OK;
}

teeny_status teeny__activation_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    teeny_status st = check_act(ctx, s->attrs.activation.act);
    s->out = s->in[0];
    return st;
}

teeny_status teeny__mul_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    if (s->in[0].ndim != s->in[1].ndim ||
        memcmp(s->in[0].shape, s->in[1].shape, sizeof(int64_t) * (size_t)s->in[0].ndim))
        return teeny__error(ctx, TEENY_ERR_SHAPE, "mul: the two inputs differ in shape");
    s->out = s->in[0];
    return TEENY_OK;
}

/* ---- graph builders ---- */

teeny_status teeny_graph_activation(teeny_graph *g, const char *name, teeny_node x, teeny_act act, teeny_node *out)
{
    teeny__op_attrs at = {.activation = {act}};
    return teeny__graph_node(g, TEENY__OP_ACTIVATION, name, 1, &x, &at, out);
}

teeny_status teeny_graph_add(teeny_graph *g, const char *name, teeny_node a, teeny_node b, teeny_node *out)
{
    teeny_node in[2] = {a, b};
    return teeny__graph_node(g, TEENY__OP_ADD, name, 2, in, NULL, out);
}

teeny_status teeny_graph_mul(teeny_graph *g, const char *name, teeny_node a, teeny_node b, teeny_node *out)
{
    teeny_node in[2] = {a, b};
    return teeny__graph_node(g, TEENY__OP_MUL, name, 2, in, NULL, out);
}
