/*
 * logic.c -- the shape checks exporters wrap around attention
 * (nn.MultiheadAttention, timm: Shape -> Gather -> Equal/Mod -> Where/If),
 * folded on the host at import for the batch given: Equal, Less, Greater,
 * LessOrEqual, GreaterOrEqual, Not, And, Or, Xor, Mod (fmod 0 and 1),
 * Where and Range of constants with NumPy broadcasting, and If of a
 * constant condition, whose taken branch is imported in its place.
 * Booleans are held as int64 0/1 with onnx_type BOOL, as Cast and
 * Dropout's mask already hold them. A run-time operand is refused naming
 * the node (the graph has no compare or select op yet), except Where
 * whose constant condition picks one operand everywhere: that operand,
 * passed through.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_internal.h"

#define S(x) ((x) ? (x) : "")

static const char *const NO_ATTRS[] = {NULL};

/* Input i as a constant; a run-time value is refused as what this op
 * cannot compute yet (a graph input goes through teeny__ox_in_const:
 * bound when it is an integer tensor with a feed). */
static teeny_status fold_in(ox_import *im, int i, const char *what, const ox_const **c)
{
    int idx;
    teeny_status st = teeny__ox_in_present(im, i, what, &idx);
    if (st != TEENY_OK)
        return st;
    const ox_value *v = &im->vals[idx];
    if (v->kind == OX_RUNTIME || v->kind == OX_SIGMOID)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "input %d (%s) \"%.80s\" is computed at run time; %s is only "
                              "folded at import, of constants and shapes (run-time %s is not supported yet)", i, what,
                              v->name, im->node->op_type, im->node->op_type);
    if (v->kind == OX_INPUT && !v->feed)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "input %d (%s) is graph input \"%.80s\", given no value at "
                              "import; %s is only folded at import, of constants and shapes (give the input a feed; "
                              "run-time %s is not supported yet)", i, what, v->name, im->node->op_type,
                              im->node->op_type);
    return teeny__ox_in_const(im, i, what, 0, c);
}

static teeny_status alloc_out(ox_import *im, ox_type type, int onnx_type, const ox_shape *s, ox_const *c)
{
    teeny_status st = teeny__ox_const_alloc(im, type, onnx_type, s, c);
    return st == TEENY_OK ? TEENY_OK : teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
}

/* ---- comparisons and logic ---- */

/* Equal, Less, Greater, LessOrEqual, GreaterOrEqual of two constants of
 * one type (floats compared as floats: NaN equals nothing), and And, Or,
 * Xor of two booleans (any nonzero value true): a bool tensor. */
teeny_status teeny__ox_op_compare(ox_import *im)
{
    static const char *const names[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                        "And", "Or", "Xor"};
    enum { EQ, LT, GT, LE, GE, AND, OR, XOR };
    const ox_const *a, *b;
    ox_shape o;
    ox_const c;
    int op = 0;
    while (strcmp(names[op], im->node->op_type))
        op++; /* the handler is only registered for these */
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = fold_in(im, 0, "A", &a)) != TEENY_OK || (st = fold_in(im, 1, "B", &b)) != TEENY_OK)
        return st;
    if (op < AND && a->type != b->type)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "operands of different types (%s, %s)",
                              teeny__ox_type_name(a->onnx_type), teeny__ox_type_name(b->onnx_type));
    if (!teeny__ox_broadcast(&a->shape, &b->shape, &o))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "the operands' shapes do not broadcast");
    if ((st = alloc_out(im, OX_I64, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, &o, &c)) != TEENY_OK)
        return st;
    int64_t *y = c.data;
    for (int64_t k = 0; k < c.numel; k++) {
        int64_t i = teeny__ox_bcast_index(&o, &a->shape, k), j = teeny__ox_bcast_index(&o, &b->shape, k);
        if (op >= AND) {
            int x = teeny__ox_get_f(a, i) != 0, z = teeny__ox_get_f(b, j) != 0;
            y[k] = op == AND ? x && z : op == OR ? x || z : x != z;
        } else if (a->type == OX_F32) {
            float x = ((const float *)a->data)[i], z = ((const float *)b->data)[j];
            y[k] = op == EQ ? x == z : op == LT ? x < z : op == GT ? x > z : op == LE ? x <= z : x >= z;
        } else {
            int64_t x = ((const int64_t *)a->data)[i], z = ((const int64_t *)b->data)[j];
            y[k] = op == EQ ? x == z : op == LT ? x < z : op == GT ? x > z : op == LE ? x <= z : x >= z;
        }
    }
    return teeny__ox_out_const(im, 0, &c);
}

teeny_status teeny__ox_op_logical_not(ox_import *im)
{
    const ox_const *x;
    ox_const c;
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = fold_in(im, 0, "X", &x)) != TEENY_OK ||
        (st = alloc_out(im, OX_I64, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, &x->shape, &c)) != TEENY_OK)
        return st;
    for (int64_t k = 0; k < c.numel; k++)
        ((int64_t *)c.data)[k] = teeny__ox_get_f(x, k) == 0;
    return teeny__ox_out_const(im, 0, &c);
}

/* ---- Mod ---- */

/* Integers: fmod 0 takes the divisor's sign (Python's %), fmod 1 the
 * dividend's (C's %); a zero divisor is refused. Floats need fmod 1
 * (ONNX: fmod 0 is for integers), C's fmod. */
teeny_status teeny__ox_op_mod(ox_import *im)
{
    static const char *const attrs[] = {"fmod", NULL};
    const ox_const *a, *b;
    int64_t fmod_attr;
    ox_shape o;
    ox_const c;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "fmod", 0, &fmod_attr)) != TEENY_OK ||
        (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK || (st = fold_in(im, 0, "A", &a)) != TEENY_OK ||
        (st = fold_in(im, 1, "B", &b)) != TEENY_OK)
        return st;
    if (fmod_attr != 0 && fmod_attr != 1)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute fmod=%lld (0 or 1)", (long long)fmod_attr);
    if (a->type != b->type)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "operands of different types (%s, %s)",
                              teeny__ox_type_name(a->onnx_type), teeny__ox_type_name(b->onnx_type));
    if (a->type == OX_F32 && !fmod_attr)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "fmod=0 on floats (ONNX: floating-point Mod needs fmod=1)");
    if (!teeny__ox_broadcast(&a->shape, &b->shape, &o))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "the operands' shapes do not broadcast");
    if ((st = alloc_out(im, a->type, a->onnx_type, &o, &c)) != TEENY_OK)
        return st;
    for (int64_t k = 0; k < c.numel; k++) {
        int64_t i = teeny__ox_bcast_index(&o, &a->shape, k), j = teeny__ox_bcast_index(&o, &b->shape, k);
        if (a->type == OX_F32) {
            ((float *)c.data)[k] = fmodf(((const float *)a->data)[i], ((const float *)b->data)[j]);
            continue;
        }
        int64_t x = ((const int64_t *)a->data)[i], z = ((const int64_t *)b->data)[j];
        if (z == 0) {
            teeny__ox_const_free(&c);
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "integer Mod by 0 (%lld %% 0)", (long long)x);
        }
        int64_t r = z == -1 ? 0 : x % z; /* INT64_MIN % -1 overflows in C */
        if (!fmod_attr && r != 0 && (r < 0) != (z < 0))
            r += z;
        ((int64_t *)c.data)[k] = r;
    }
    return teeny__ox_out_const(im, 0, &c);
}

/* ---- Where ---- */

/* The node's output o as a copy of constant value idx. */
static teeny_status const_copy_out(ox_import *im, int idx, int o)
{
    const ox_const *x = &im->vals[idx].c;
    ox_const c;
    teeny_status st = alloc_out(im, x->type, x->onnx_type, &x->shape, &c);
    if (st != TEENY_OK)
        return st;
    if (c.numel)
        memcpy(c.data, x->data, (size_t)c.numel * teeny__ox_esize(c.type));
    return teeny__ox_out_const(im, o, &c);
}

/* Output 0 as input i unchanged: a copy of a constant, or a view of a
 * run-time value. */
static teeny_status pass_through(ox_import *im, int i, const char *what)
{
    int idx;
    teeny_status st = teeny__ox_in_present(im, i, what, &idx);
    if (st != TEENY_OK)
        return st;
    if (im->vals[idx].kind == OX_CONST)
        return const_copy_out(im, idx, 0);
    teeny_node n;
    if ((st = teeny__ox_in_runtime(im, i, what, &idx)) != TEENY_OK)
        return st;
    ox_shape s = im->vals[idx].shape;
    if ((st = teeny__ox_view(im, idx, &s, &n)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, n, &s);
}

/* The ONNX shape of input i, a constant or a run-time value (a graph
 * input becomes one). */
static teeny_status operand_shape(ox_import *im, int i, const char *what, ox_shape *s)
{
    int idx;
    teeny_status st = teeny__ox_in_present(im, i, what, &idx);
    if (st != TEENY_OK)
        return st;
    if (im->vals[idx].kind != OX_CONST && (st = teeny__ox_in_runtime(im, i, what, &idx)) != TEENY_OK)
        return st;
    *s = im->vals[idx].kind == OX_CONST ? im->vals[idx].c.shape : im->vals[idx].shape;
    return TEENY_OK;
}

/* Where(condition, X, Y) of constants, broadcast over the three. With X
 * or Y computed at run time, only a condition that picks one operand
 * everywhere, of the result's shape, is taken (that operand unchanged):
 * the graph has no select op, and X * mask + Y * (1 - mask) would turn
 * the other operand's inf or NaN into NaN. */
teeny_status teeny__ox_op_where(ox_import *im)
{
    const ox_const *cond, *x, *y;
    int xi, yi;
    ox_shape t, o;
    ox_const c;
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = fold_in(im, 0, "condition", &cond)) != TEENY_OK ||
        (st = teeny__ox_in_present(im, 1, "X", &xi)) != TEENY_OK ||
        (st = teeny__ox_in_present(im, 2, "Y", &yi)) != TEENY_OK)
        return st;
    for (int i = 1; i <= 2; i++) { /* an integer X or Y given at import is a constant */
        const ox_value *v = &im->vals[i == 1 ? xi : yi];
        const ox_const *bound;
        if (v->kind == OX_INPUT && v->feed && !teeny__ox_is_float((int)v->feed->dtype) &&
            (st = teeny__ox_in_const(im, i, i == 1 ? "X" : "Y", 0, &bound)) != TEENY_OK)
            return st;
    }
    if (im->vals[xi].kind != OX_CONST || im->vals[yi].kind != OX_CONST) {
        int64_t n_true = 0;
        ox_shape xs, ys;
        for (int64_t k = 0; k < cond->numel; k++)
            n_true += teeny__ox_get_f(cond, k) != 0;
        int pick = n_true == cond->numel ? 1 : n_true == 0 ? 2 : 0; /* the operand the condition takes everywhere */
        if ((st = operand_shape(im, 1, "X", &xs)) != TEENY_OK || (st = operand_shape(im, 2, "Y", &ys)) != TEENY_OK)
            return st;
        if (!teeny__ox_broadcast(&cond->shape, &xs, &t) || !teeny__ox_broadcast(&t, &ys, &o))
            return teeny__ox_fail(im, TEENY_ERR_SHAPE, "the operands' shapes do not broadcast");
        const ox_shape *ps = pick == 1 ? &xs : &ys;
        if (!pick || cond->numel == 0 || ps->ndim != o.ndim || memcmp(ps->d, o.d, sizeof(int64_t) * (size_t)o.ndim))
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "Where of run-time values is only taken where the "
                                  "constant condition picks one operand everywhere and the result has its shape "
                                  "(run-time select is not supported yet)");
        return pass_through(im, pick, pick == 1 ? "X" : "Y");
    }
    x = &im->vals[xi].c;
    y = &im->vals[yi].c;
    if (x->type != y->type)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "X and Y of different types (%s, %s)",
                              teeny__ox_type_name(x->onnx_type), teeny__ox_type_name(y->onnx_type));
    if (!teeny__ox_broadcast(&cond->shape, &x->shape, &t) || !teeny__ox_broadcast(&t, &y->shape, &o))
        return teeny__ox_fail(im, TEENY_ERR_SHAPE, "the operands' shapes do not broadcast");
    if ((st = alloc_out(im, x->type, x->onnx_type, &o, &c)) != TEENY_OK)
        return st;
    size_t es = teeny__ox_esize(c.type);
    for (int64_t k = 0; k < c.numel; k++) {
        int take_x = teeny__ox_get_f(cond, teeny__ox_bcast_index(&o, &cond->shape, k)) != 0;
        const ox_const *from = take_x ? x : y;
        memcpy((char *)c.data + k * es, (const char *)from->data + teeny__ox_bcast_index(&o, &from->shape, k) * es, es);
    }
    return teeny__ox_out_const(im, 0, &c);
}

/* ---- Range ---- */

/* Range(start, limit, delta) of scalars: max(ceil((limit - start) /
 * delta), 0) values start + i * delta. Integers are counted exactly (no
 * overflow in limit - start); a zero delta, a count past the folding
 * budget or a non-finite float count is refused. */
teeny_status teeny__ox_op_range(ox_import *im)
{
    const ox_const *in[3];
    static const char *const what[3] = {"start", "limit", "delta"};
    ox_shape o = {1, {0}};
    ox_const c;
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK)
        return st;
    for (int i = 0; i < 3; i++) {
        if ((st = fold_in(im, i, what[i], &in[i])) != TEENY_OK)
            return st;
        if (in[i]->numel != 1 || in[i]->type != in[0]->type)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "%s must be a scalar of start's type", what[i]);
    }
    if (teeny__ox_get_f(in[2], 0) == 0)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "delta 0");
    uint64_t n = 0;
    if (in[0]->type == OX_I64) {
        int64_t start = teeny__ox_get_i(in[0], 0), limit = teeny__ox_get_i(in[1], 0), delta = teeny__ox_get_i(in[2], 0);
        if (delta > 0 ? limit > start : limit < start) {
            uint64_t span = delta > 0 ? (uint64_t)limit - (uint64_t)start : (uint64_t)start - (uint64_t)limit;
            uint64_t step = delta > 0 ? (uint64_t)delta : 0 - (uint64_t)delta;
            n = span / step + (span % step != 0);
        }
    } else {
        float start = ((const float *)in[0]->data)[0], limit = ((const float *)in[1]->data)[0];
        double count = ceil((double)(limit - start) / ((const float *)in[2]->data)[0]);
        if (!(count < (double)OX_MAX_ELEMS + 1))
            return teeny__ox_fail(im, TEENY_ERR_RANGE, "%g values from start %g, limit %g, delta %g", count, start,
                                  limit, ((const float *)in[2]->data)[0]);
        n = count > 0 ? (uint64_t)count : 0;
    }
    if (n > OX_MAX_ELEMS)
        return teeny__ox_fail(im, TEENY_ERR_RANGE, "%llu values (at most %d)", (unsigned long long)n, OX_MAX_ELEMS);
    o.d[0] = (int64_t)n;
    if ((st = alloc_out(im, in[0]->type, in[0]->onnx_type, &o, &c)) != TEENY_OK)
        return st;
    for (int64_t k = 0; k < c.numel; k++) {
        if (c.type == OX_F32)
            ((float *)c.data)[k] = ((const float *)in[0]->data)[0] + (float)k * ((const float *)in[2]->data)[0];
        else /* wraps as two's complement where start + k delta leaves int64 (it cannot for k < n) */
            ((int64_t *)c.data)[k] = (int64_t)((uint64_t)teeny__ox_get_i(in[0], 0) +
                                               (uint64_t)k * (uint64_t)teeny__ox_get_i(in[2], 0));
    }
    return teeny__ox_out_const(im, 0, &c);
}

/* ---- If ---- */

/* Attribute name as a graph. */
static teeny_status graph_attr(ox_import *im, const char *name, const Onnx__GraphProto **g)
{
    const Onnx__AttributeProto *a = teeny__ox_attr(im, name);
    if (!a || !a->g || (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute %s must be a graph", name);
    *g = a->g;
    return TEENY_OK;
}

/* The If's output k as branch output value idx: the same constant (a
 * copy) or run-time node. */
static teeny_status branch_out(ox_import *im, int k, const char *branch, const char *name)
{
    int idx = teeny__ox_find(im, name);
    teeny_status st;
    if (idx < 0)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "%s output \"%.80s\" is not produced in the branch or before it",
                              branch, name);
    if (im->vals[idx].kind == OX_CONST)
        return const_copy_out(im, idx, k);
    /* a graph input or a deferred Sigmoid becomes a node, as a run-time input would */
    const Onnx__NodeProto *if_node = im->node;
    Onnx__NodeProto fake = *if_node;
    char *in[1] = {(char *)name};
    fake.n_input = 1;
    fake.input = in;
    im->node = &fake;
    st = teeny__ox_in_runtime(im, 0, "branch output", &idx);
    im->node = if_node;
    if (st != TEENY_OK)
        return st;
    ox_value v = im->vals[idx]; /* defining the output may move the table */
    if ((st = teeny__ox_out_runtime(im, k, v.node, &v.shape)) != TEENY_OK)
        return st;
    int out = *S(im->node->output[k]) ? teeny__ox_find(im, im->node->output[k]) : -1;
    if (out >= 0) {
        im->vals[out].is_i32 = v.is_i32;
        im->vals[out].is_loss = v.is_loss;
    }
    return TEENY_OK;
}

/* If with a constant condition (the exporters' shape checks): the taken
 * branch's initializers and nodes are imported in the If's place, their
 * errors naming the If too, and its outputs become the If's. The other
 * branch is never read past its attribute. */
teeny_status teeny__ox_op_if_const(ox_import *im)
{
    static const char *const attrs[] = {"then_branch", "else_branch", NULL};
    const Onnx__GraphProto *then_g, *else_g;
    const ox_const *cond;
    int ci;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = graph_attr(im, "then_branch", &then_g)) != TEENY_OK ||
        (st = graph_attr(im, "else_branch", &else_g)) != TEENY_OK ||
        (st = teeny__ox_in_present(im, 0, "cond", &ci)) != TEENY_OK)
        return st;
    if (im->vals[ci].kind == OX_RUNTIME || im->vals[ci].kind == OX_SIGMOID)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "the condition \"%.80s\" is computed at run time; If is only "
                              "taken with a condition known at import (run-time control flow is not supported)",
                              im->vals[ci].name);
    if ((st = teeny__ox_in_const(im, 0, "cond", 0, &cond)) != TEENY_OK)
        return st;
    if (cond->numel != 1)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "the condition has %lld elements, not 1", (long long)cond->numel);
    int taken = teeny__ox_get_f(cond, 0) != 0;
    const Onnx__GraphProto *g = taken ? then_g : else_g;
    const char *branch = taken ? "then_branch" : "else_branch";
    if (g->n_input)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "%s has %zu inputs (a branch has none)", branch, g->n_input);
    if (g->n_output != im->node->n_output)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "%s has %zu outputs, the If %zu", branch, g->n_output,
                              im->node->n_output);
    if (g->n_sparse_initializer)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "%s: sparse initializers are not supported", branch);
    for (size_t i = 0; i < g->n_initializer; i++) {
        char what[128];
        int idx;
        snprintf(what, sizeof what, "%s initializer \"%.80s\"", branch, S(g->initializer[i]->name));
        if ((st = teeny__ox_define(im, g->initializer[i]->name, OX_CONST, &idx)) != TEENY_OK)
            return st;
        if ((st = teeny__ox_tensor_load(im->ctx, g->initializer[i], im->dir, what, &im->vals[idx].c)) != TEENY_OK)
            return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
        im->vals[idx].is_initializer = 1;
        teeny__ox_const_held(im, &im->vals[idx].c);
    }
    const Onnx__NodeProto *if_node = im->node;
    for (size_t i = 0; i < g->n_node; i++) {
        im->node = g->node[i];
        st = im->import_node(im);
        im->node = if_node;
        if (st != TEENY_OK) /* the branch node's message, under the If's name */
            return teeny__ox_fail(im, st, "%s: %s", branch, teeny_last_error(im->ctx));
    }
    for (size_t k = 0; k < g->n_output; k++)
        if ((st = branch_out(im, (int)k, branch, S(g->output[k]->name))) != TEENY_OK)
            return st;
    return TEENY_OK;
}
