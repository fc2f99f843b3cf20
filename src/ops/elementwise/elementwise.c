/*
 * elementwise.c -- y = a + b, y = a * b and the activations (teeny_act:
 * ReLU, SiLU, Sigmoid, Tanh, HardSigmoid, HardSwish, LeakyRelu, GELU in
 * both forms, Clip, Mish, Erf; formulas in cl/common.cl) with their
 * gradients. Tensors of any shape; only element counts must agree.
 * Kernels: cl/elementwise.cl, one work-item per element (add, mul and
 * add's backward: per float4 where every offset is a multiple of 4), or
 * in the CPU variant (ctx->tune.variant) a run of EW_RUN elements in
 * float16 vectors for add and the activations.
 *
 * Op-table entries (slots TEENY__ADD_*, _ACTIVATION_*, _MUL_*: ops.h):
 *   add:        forward in = [a, b], out = [y];
 *               backward in = [a, b, y, dy], out = [da, db] (copies of dy)
 *   activation: attrs.activation = {act, alpha, beta}; forward in = [x], out = [y];
 *               backward in = [x, y, dy], out = [dx]
 *   mul:        forward in = [a, b], out = [y];
 *               backward in = [a, b, y, dy], out = [da = dy * b, db = dy * a]
 */
#include <string.h>

#include "../ops.h"

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

static teeny_status check_act(teeny_ctx *ctx, const teeny__activation_attrs *at)
{
    if ((int)at->act < 0 || (int)at->act >= TEENY__ACT_COUNT)
        return teeny__error(ctx, TEENY_ERR_ARG, "unknown activation %d", (int)at->act);
    if (at->alpha != at->alpha || at->beta != at->beta)
        return teeny__error(ctx, TEENY_ERR_ARG, "activation %d: alpha %g, beta %g must not be NaN", (int)at->act,
                            (double)at->alpha, (double)at->beta);
    return TEENY_OK;
}

static teeny_status act_launch(teeny_ctx *ctx, const teeny__activation_attrs *at, const teeny_tensor *x,
                               teeny_tensor *y);

/* A kernel over three tensors (each buffer with its element offset) and
 * n = t2's elements: ew_add, ew_mul, ew_copy2, float4s per work-item
 * where the offsets allow (buffers start aligned); cpu_name (NULL: none)
 * in the CPU variant. */
static teeny_status launch3(teeny_ctx *ctx, const char *name, const char *cpu_name, const teeny_tensor *t0,
                            const teeny_tensor *t1, const teeny_tensor *t2)
{
    int n = (int)t2->numel, o0 = teeny__off(t0), o1 = teeny__off(t1), o2 = teeny__off(t2);
    int cpu = cpu_name && cpu_variant(ctx), vec = !cpu && o0 % 4 == 0 && o1 % 4 == 0 && o2 % 4 == 0;
    cl_kernel k;
    name = cpu ? cpu_name : name;
    teeny_status st = teeny__kernel_get(ctx, "elementwise", "", name, &k);
    if (st == TEENY_OK && cpu)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &t0->buf, sizeof o0, &o0, sizeof(cl_mem), &t1->buf,
                             sizeof o1, &o1, sizeof(cl_mem), &t2->buf, sizeof o2, &o2, sizeof n, &n, (size_t)0);
    else if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &t0->buf, sizeof o0, &o0, sizeof(cl_mem), &t1->buf,
                             sizeof o1, &o1, sizeof(cl_mem), &t2->buf, sizeof o2, &o2, sizeof n, &n, sizeof vec,
                             &vec, (size_t)0);
    if (st == TEENY_OK)
        st = ew_launch(ctx, name, vec ? n / 4 + (n % 4 != 0) : n, cpu, k);
    return st;
}

teeny_status teeny__add_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    return launch3(ctx, "ew_add", "ew_add_cpu", a->in[TEENY__ADD_A], a->in[TEENY__ADD_B], a->out[TEENY__OUT_VALUE]);
}

/* Both inputs' gradients are dy: one launch writing the two (ew_copy2),
 * or a copy where one is wanted. */
teeny_status teeny__add_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dy = a->in[TEENY__ADD_DY];
    teeny_tensor *da = a->out[TEENY__ADD_A], *db = a->out[TEENY__ADD_B];
    if (!da || !db) {
        const teeny__activation_attrs none = teeny__act_attrs(TEENY_ACT_NONE);
        return da || db ? act_launch(ctx, &none, dy, da ? da : db) : TEENY_OK;
    }
    return launch3(ctx, "ew_copy2", "ew_copy2_cpu", dy, da, db);
}

teeny_status teeny__activation_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    return act_launch(ctx, &a->attrs.activation, a->in[TEENY__ACTIVATION_X], a->out[TEENY__OUT_VALUE]);
}

static teeny_status act_launch(teeny_ctx *ctx, const teeny__activation_attrs *at, const teeny_tensor *x,
                               teeny_tensor *y)
{
    int n = (int)y->numel, ox = teeny__off(x), oy = teeny__off(y), act = (int)at->act;
    const char *name = cpu_variant(ctx) ? "ew_act_forward_cpu" : "ew_act_forward";
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "elementwise", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof act, &act, sizeof(float), &at->alpha, sizeof(float), &at->beta,
                             sizeof(cl_mem), &x->buf, sizeof ox, &ox, sizeof(cl_mem), &y->buf, sizeof oy, &oy,
                             sizeof n, &n, (size_t)0);
    if (st == TEENY_OK)
        st = ew_launch(ctx, name, n, cpu_variant(ctx), k);
    return st;
}

teeny_status teeny__activation_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__ACTIVATION_X], *dy = a->in[TEENY__ACTIVATION_DY];
    teeny_tensor *dx = a->out[TEENY__ACTIVATION_X];
    const teeny__activation_attrs *at = &a->attrs.activation;
    int act = (int)at->act;
    int n = (int)dx->numel, ox = teeny__off(x), ody = teeny__off(dy), odx = teeny__off(dx);
    const char *name = cpu_variant(ctx) ? "ew_act_backward_cpu" : "ew_act_backward";
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "elementwise", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof act, &act, sizeof(float), &at->alpha, sizeof(float), &at->beta,
                             sizeof(cl_mem), &x->buf, sizeof ox, &ox, sizeof(cl_mem), &dy->buf, sizeof ody, &ody, sizeof(cl_mem), &dx->buf, sizeof odx, &odx,
                             sizeof n, &n, (size_t)0);
    if (st == TEENY_OK)
        st = ew_launch(ctx, name, n, cpu_variant(ctx), k);
    return st;
}

teeny_status teeny__mul_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    return launch3(ctx, "ew_mul", NULL, a->in[TEENY__MUL_A], a->in[TEENY__MUL_B], a->out[TEENY__OUT_VALUE]);
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

/* ---- shapes and the eager API ---- */

static teeny_status same_shape(teeny_ctx *ctx, const teeny__node_shapes *s)
{
    const teeny__shape *a = &s->in[0], *b = &s->in[1];
    char sa[96], sb[96];
    if (s->n_in != 2 || a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim))
        return teeny__error(ctx, TEENY_ERR_SHAPE, "a %s and b %s differ in shape",
                            teeny__dims_str(a->shape, a->ndim, sa, sizeof sa),
                            teeny__dims_str(b->shape, b->ndim, sb, sizeof sb));
    return TEENY_OK;
}

/* a and b of one shape, y the same. */
teeny_status teeny__add_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    s->out = s->in[0];
    return same_shape(ctx, s);
}

teeny_status teeny__mul_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    s->out = s->in[0];
    return same_shape(ctx, s);
}

teeny_status teeny__activation_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    s->out = s->in[0];
    return check_act(ctx, &s->attrs.activation);
}

/* The eager functions take tensors of any shapes whose element counts
 * agree (TEENY__EA_NUMEL), and run in place (y exactly a or b). */
#define EW TEENY__EA_NUMEL
#define EW_OUT (TEENY__EA_NUMEL | TEENY__EA_OUT | TEENY__EA_INPLACE)

/* y = a op b (add, mul): e's op with a and b at their slots. */
static teeny_status run_ab(teeny_ctx *ctx, const teeny__eager *e, int a_slot, int b_slot, const teeny_tensor *a,
                           const teeny_tensor *b, teeny_tensor *y)
{
    const teeny__earg args[] = {{"a", a, a_slot, EW}, {"b", b, b_slot, EW}, {"y", y, TEENY__OUT_VALUE, EW_OUT}};
    return teeny__eager_run(ctx, e, args, 3);
}

teeny_status teeny_add(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, teeny_tensor *y)
{
    static const teeny__eager e = {TEENY__EAGER_OF("teeny_add", ADD, add, forward)};
    EAGER_BEGIN("teeny_add");
    return run_ab(ctx, &e, TEENY__ADD_A, TEENY__ADD_B, a, b, y);
}

teeny_status teeny_mul(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, teeny_tensor *y)
{
    static const teeny__eager e = {TEENY__EAGER_OF("teeny_mul", MUL, mul, forward)};
    EAGER_BEGIN("teeny_mul");
    return run_ab(ctx, &e, TEENY__MUL_A, TEENY__MUL_B, a, b, y);
}

teeny_status teeny_mul_backward(teeny_ctx *ctx, const teeny_tensor *a, const teeny_tensor *b, const teeny_tensor *dy,
                                teeny_tensor *da, teeny_tensor *db)
{
    static const teeny__eager e = {TEENY__EAGER_OF("teeny_mul_backward", MUL, mul, backward)};
    const teeny__earg args[] = {{"a", a, TEENY__MUL_A, EW},
                                {"b", b, TEENY__MUL_B, EW},
                                {"dy", dy, TEENY__MUL_DY, EW},
                                {"da", da, TEENY__MUL_A, EW_OUT | TEENY__EA_OPTIONAL},
                                {"db", db, TEENY__MUL_B, EW_OUT | TEENY__EA_OPTIONAL}};
    EAGER_BEGIN("teeny_mul_backward");
    return teeny__eager_run(ctx, &e, args, 5);
}

teeny_act_params teeny_act_defaults(teeny_act act)
{
    teeny__activation_attrs at = teeny__act_attrs(act);
    return (teeny_act_params){act, at.alpha, at.beta};
}

static teeny_status act_forward(teeny_ctx *ctx, const char *fn, teeny__activation_attrs at, const teeny_tensor *x,
                                teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF(fn, ACTIVATION, activation, forward), .attrs.activation = at};
    const teeny__earg args[] = {{"x", x, TEENY__ACTIVATION_X, EW}, {"y", y, TEENY__OUT_VALUE, EW_OUT}};
    return teeny__eager_run(ctx, &e, args, 2);
}

static teeny_status act_backward(teeny_ctx *ctx, const char *fn, teeny__activation_attrs at, const teeny_tensor *x,
                                 const teeny_tensor *dy, teeny_tensor *dx)
{
    teeny__eager e = {TEENY__EAGER_OF(fn, ACTIVATION, activation, backward), .attrs.activation = at};
    const teeny__earg args[] = {{"x", x, TEENY__ACTIVATION_X, EW},
                                {"dy", dy, TEENY__ACTIVATION_DY, EW},
                                {"dx", dx, TEENY__ACTIVATION_X, EW_OUT}};
    return teeny__eager_run(ctx, &e, args, 3);
}

teeny_status teeny_activation_forward(teeny_ctx *ctx, teeny_act act, const teeny_tensor *x, teeny_tensor *y)
{
    EAGER_BEGIN("teeny_activation_forward");
    return act_forward(ctx, "teeny_activation_forward", teeny__act_attrs(act), x, y);
}

teeny_status teeny_activation_backward(teeny_ctx *ctx, teeny_act act, const teeny_tensor *x, const teeny_tensor *dy,
                                       teeny_tensor *dx)
{
    EAGER_BEGIN("teeny_activation_backward");
    return act_backward(ctx, "teeny_activation_backward", teeny__act_attrs(act), x, dy, dx);
}

teeny_status teeny_activation_forward_ex(teeny_ctx *ctx, const teeny_act_params *p, const teeny_tensor *x,
                                         teeny_tensor *y)
{
    EAGER_BEGIN("teeny_activation_forward_ex");
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_activation_forward_ex: p is NULL");
    return act_forward(ctx, "teeny_activation_forward_ex", (teeny__activation_attrs){p->act, p->alpha, p->beta}, x, y);
}

teeny_status teeny_activation_backward_ex(teeny_ctx *ctx, const teeny_act_params *p, const teeny_tensor *x,
                                          const teeny_tensor *dy, teeny_tensor *dx)
{
    EAGER_BEGIN("teeny_activation_backward_ex");
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_activation_backward_ex: p is NULL");
    return act_backward(ctx, "teeny_activation_backward_ex", (teeny__activation_attrs){p->act, p->alpha, p->beta}, x,
                        dy, dx);
}
