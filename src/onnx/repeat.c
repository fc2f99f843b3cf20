/*
 * repeat.c -- Tile and CumSum, lowered at import onto graph ops that
 * exist (no kernels of their own). Of a constant input both fold on the
 * host. Of a run-time value:
 *   Tile    one concat_axis node per tiled axis (r copies of the value
 *           along it): an exact copy, its gradient the concat's (the r
 *           slices summed by the graph's fan-out accumulation).
 *   CumSum  the scanned axis moved last and multiplied by a constant
 *           0/1 triangular [n, n] matrix (the MatMul kernel: each output
 *           sums its n products in order, the zeros exactly), moved back;
 *           its gradient is the matmul's (dy times the transposed
 *           triangle: the reverse scan). n is capped (OX_CUMSUM_MAX_N):
 *           the matrix costs n^2 floats and the product n^2 per row.
 */
#include <string.h>

#include "onnx_internal.h"

#define OX_TILE_MAX_REPEATS 64     /* copies per tiled axis of a run-time value */
#define OX_CUMSUM_MAX_N 2048       /* scanned length of a run-time value */

static const char *const NO_ATTRS[] = {NULL};

/* Whether input i is a constant. */
static int is_const(ox_import *im, int i)
{
    int idx;
    return teeny__ox_in(im, i, &idx) == TEENY_OK && idx >= 0 && im->vals[idx].kind == OX_CONST;
}

/* ---- Tile ---- */

/* Tile of a constant: element k of the result reads the input at each
 * coordinate modulo the input's size. */
static teeny_status tile_fold(ox_import *im, const ox_const *in, const ox_shape *o)
{
    ox_const c;
    size_t es = teeny__ox_esize(in->type);
    teeny_status st = teeny__ox_const_alloc(im, in->type, in->onnx_type, o, &c);
    if (st != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    for (int64_t k = 0; k < c.numel; k++) {
        int64_t rest = k, src = 0, stride = 1;
        for (int d = o->ndim - 1; d >= 0; d--) {
            src += (rest % o->d[d]) % in->shape.d[d] * stride;
            stride *= in->shape.d[d];
            rest /= o->d[d];
        }
        memcpy((char *)c.data + (size_t)k * es, (const char *)in->data + (size_t)src * es, es);
    }
    return teeny__ox_out_const(im, 0, &c);
}

teeny_status teeny__ox_op_tile(ox_import *im)
{
    int64_t reps[OX_MAX_DIMS];
    int n;
    const ox_const *rc;
    ox_shape s, o;
    teeny_status st = teeny__ox_attrs_allowed(im, NO_ATTRS);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = teeny__ox_in_const(im, 1, "repeats", 0, &rc)) != TEENY_OK)
        return st;
    if (rc->type != OX_I64 || rc->shape.ndim != 1)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "repeats must be a 1-D integer tensor");
    if ((st = teeny__ox_const_ints(im, rc, "repeats", OX_MAX_DIMS, reps, &n)) != TEENY_OK)
        return st;
    int fold = is_const(im, 0);
    const ox_const *in = NULL;
    teeny_node x = -1;
    if (fold) {
        if ((st = teeny__ox_in_const(im, 0, "input", 0, &in)) != TEENY_OK)
            return st;
        s = in->shape;
    } else if ((st = teeny__ox_operand(im, 0, "input", &x, &s)) != TEENY_OK)
        return st;
    if (n != s.ndim)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "repeats has %d values for input rank %d", n, s.ndim);
    o = s;
    for (int d = 0; d < s.ndim; d++) {
        if (reps[d] < 0)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "repeats[%d] = %lld is negative", d, (long long)reps[d]);
        if ((o.d[d] = teeny__mul_sizes(s.d[d], reps[d])) < 0 || o.d[d] > OX_MAX_ELEMS)
            return teeny__ox_fail(im, TEENY_ERR_RANGE, "axis %d of %lld repeated %lld times", d, (long long)s.d[d],
                                  (long long)reps[d]);
    }
    if (teeny__ox_numel(&o) < 0)
        return teeny__ox_fail(im, TEENY_ERR_RANGE, "the result has more than %lld elements", (long long)OX_MAX_ELEMS);
    if (fold)
        return tile_fold(im, in, &o);
    if (teeny__ox_numel(&o) == 0)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "an empty result of a run-time value");
    teeny_node cur = x;
    for (int d = 0; d < s.ndim; d++) {
        teeny_node xs[OX_TILE_MAX_REPEATS];
        char buf[TEENY__NAME_CAP];
        if (reps[d] == 1)
            continue;
        if (reps[d] > OX_TILE_MAX_REPEATS)
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "repeats[%d] = %lld of a run-time value (at most %d)", d,
                                  (long long)reps[d], OX_TILE_MAX_REPEATS);
        for (int64_t r = 0; r < reps[d]; r++)
            xs[r] = cur;
        if ((st = teeny_graph_concat_axis(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), d, (int)reps[d], xs, &cur)) !=
            TEENY_OK)
            return teeny__ox_graph_fail(im, st);
    }
    if (cur == x) { /* all ones: a view keeps one node per value */
        if ((st = teeny__ox_view_node(im, x, &s, &s, &cur)) != TEENY_OK)
            return st;
    }
    return teeny__ox_out_runtime(im, 0, cur, &o);
}

/* ---- CumSum ---- */

/* Whether source i adds into result j of a scan. */
static int scan_takes(int64_t i, int64_t j, int exclusive, int reverse)
{
    return reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
}

static teeny_status cumsum_fold(ox_import *im, const ox_const *in, int ax, int exclusive, int reverse)
{
    ox_const c;
    teeny_status st = teeny__ox_const_alloc(im, in->type, in->onnx_type, &in->shape, &c);
    if (st != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    int64_t len = in->shape.d[ax], inner = 1, outer = 1;
    for (int d = 0; d < in->shape.ndim; d++) {
        if (d < ax)
            outer *= in->shape.d[d];
        else if (d > ax)
            inner *= in->shape.d[d];
    }
    for (int64_t row = 0; row < outer * inner; row++) {
        int64_t base = row / inner * len * inner + row % inner;
        double acc_f = 0.0; /* a float scan sums in double, then rounds once */
        int64_t acc_i = 0;
        for (int64_t t = 0; t < len; t++) {
            int64_t j = reverse ? len - 1 - t : t, at = base + j * inner;
            double xf = in->type == OX_F32 ? teeny__ox_get_f(in, at) : 0.0;
            int64_t xi = in->type == OX_I64 ? teeny__ox_get_i(in, at) : 0;
            if (!exclusive) {
                acc_f += xf;
                acc_i = (int64_t)((uint64_t)acc_i + (uint64_t)xi); /* wraps as int64 arithmetic does */
            }
            if (in->type == OX_F32)
                ((float *)c.data)[at] = (float)acc_f;
            else
                ((int64_t *)c.data)[at] = acc_i;
            if (exclusive) {
                acc_f += xf;
                acc_i = (int64_t)((uint64_t)acc_i + (uint64_t)xi);
            }
        }
    }
    return teeny__ox_out_const(im, 0, &c);
}

/* y = x T along the last axis, T[i][j] = 1 where source i adds into j. */
static teeny_status cumsum_matmul(ox_import *im, teeny_node x, int64_t len, int exclusive, int reverse, teeny_node *y)
{
    char buf[TEENY__NAME_CAP];
    float *t = teeny__malloc((size_t)(len * len) * sizeof *t);
    if (!t)
        return teeny__ox_fail(im, TEENY_ERR_NOMEM, "out of host memory");
    for (int64_t i = 0; i < len; i++)
        for (int64_t j = 0; j < len; j++)
            t[i * len + j] = scan_takes(i, j, exclusive, reverse) ? 1.0f : 0.0f;
    teeny_node tn;
    teeny_status st = teeny_graph_constant(im->g, teeny__ox_name(im, "triangle", buf, sizeof buf), 2,
                                           (int64_t[]){len, len}, t, &tn);
    teeny__free(t);
    if (st == TEENY_OK)
        st = teeny_graph_matmul(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x, tn, y);
    return st == TEENY_OK ? TEENY_OK : teeny__ox_graph_fail(im, st);
}

teeny_status teeny__ox_op_cumsum(ox_import *im)
{
    static const char *const attrs[] = {"exclusive", "reverse", NULL};
    int64_t exclusive, reverse;
    const ox_const *ac;
    int ax;
    ox_shape s;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_int(im, "exclusive", 0, &exclusive)) != TEENY_OK ||
        (st = teeny__ox_attr_int(im, "reverse", 0, &reverse)) != TEENY_OK ||
        (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK ||
        (st = teeny__ox_in_const(im, 1, "axis", 0, &ac)) != TEENY_OK)
        return st;
    if ((exclusive != 0 && exclusive != 1) || (reverse != 0 && reverse != 1))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attributes exclusive=%lld, reverse=%lld (0 or 1)",
                              (long long)exclusive, (long long)reverse);
    if (ac->type != OX_I64 || ac->numel != 1 || ac->shape.ndim > 1)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "axis must be one integer");
    if (is_const(im, 0)) {
        const ox_const *in;
        if ((st = teeny__ox_in_const(im, 0, "x", 0, &in)) != TEENY_OK ||
            (st = teeny__ox_axis(im, "axis", teeny__ox_get_i(ac, 0), in->shape.ndim, &ax)) != TEENY_OK)
            return st;
        return cumsum_fold(im, in, ax, (int)exclusive, (int)reverse);
    }
    teeny_node x, y;
    if ((st = teeny__ox_operand(im, 0, "x", &x, &s)) != TEENY_OK ||
        (st = teeny__ox_axis(im, "axis", teeny__ox_get_i(ac, 0), s.ndim, &ax)) != TEENY_OK)
        return st;
    int64_t len = s.d[ax];
    if (len > OX_CUMSUM_MAX_N)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "a scan of %lld elements of a run-time value (at most %d)",
                              (long long)len, OX_CUMSUM_MAX_N);
    if (teeny__ox_numel(&s) == 0)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "an empty run-time value");
    /* rank 1 (the batch is the axis) or the axis last: x [.., n] T; else
     * the axis swapped with the last one and back */
    int p[TEENY_MAX_DIMS];
    char buf[TEENY__NAME_CAP];
    ox_shape v = s;
    teeny_node cur = x;
    for (int d = 0; d < s.ndim; d++)
        p[d] = d;
    p[ax] = s.ndim - 1;
    p[s.ndim - 1] = ax;
    if (s.ndim == 1) { /* [n] as [1, n]: a row */
        v = (ox_shape){2, {1, len}};
        if ((st = teeny__ox_view_node(im, x, &s, &v, &cur)) != TEENY_OK)
            return st;
    } else if (ax != s.ndim - 1) {
        if ((st = teeny_graph_transpose(im->g, teeny__ox_name(im, "to_last", buf, sizeof buf), x, p, &cur)) != TEENY_OK)
            return teeny__ox_graph_fail(im, st);
    }
    if ((st = cumsum_matmul(im, cur, len, (int)exclusive, (int)reverse, &y)) != TEENY_OK)
        return st;
    if (s.ndim == 1) {
        if ((st = teeny__ox_view_node(im, y, &v, &s, &y)) != TEENY_OK)
            return st;
    } else if (ax != s.ndim - 1) {
        if ((st = teeny_graph_transpose(im->g, teeny__ox_name(im, "back", buf, sizeof buf), y, p, &y)) != TEENY_OK)
            return teeny__ox_graph_fail(im, st);
    }
    return teeny__ox_out_runtime(im, 0, y, &s);
}
