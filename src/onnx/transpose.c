/*
 * transpose.c -- ONNX Transpose, and the run-time values of rank 6 to 8
 * it makes possible. The graph's tensors have at most TEENY_MAX_DIMS (5)
 * dimensions; ONNX values up to OX_MAX_DIMS (8). Window partitioning
 * (Swin, MaxViT) reshapes to rank 6, permutes and reshapes back. A value
 * of rank 6..8 made by Reshape or Transpose is kept "wide": its node
 * holds the same elements, contiguous, at some rank <= 5 (a view needs
 * no copy), and its record keeps the ONNX shape; so is a graph input of
 * rank 6..8. Reshape (a view), Transpose and the graph outputs take wide
 * values; every other consumer refuses them (values.c). Transpose merges the axes that stay adjacent and in order
 * (and drops axes of size 1), which is exact; a permutation that still
 * needs more than 5 axes is done as a few transposes, each moving axes
 * so that its own merged rank is <= 5 (each single-axis move needs <= 4).
 * Transpose of a constant folds, but for a float initializer of rank <= 5.
 */
#include <string.h>

#include "onnx_internal.h"

/* The transpose of shape s by perm p (output axis d is input axis p[d])
 * with adjacent in-order axes merged and axes of size 1 dropped: the
 * merged input shape ms (ms->ndim >= 1) and permutation mp. */
static void merge_axes(const ox_shape *s, const int *p, ox_shape *ms, int *mp)
{
    int keep[OX_MAX_DIMS], renum[OX_MAX_DIMS], q[OX_MAX_DIMS], n = 0, group_of[OX_MAX_DIMS], first[OX_MAX_DIMS];
    for (int a = 0; a < s->ndim; a++) {
        keep[a] = s->d[a] != 1;
        renum[a] = -1;
    }
    for (int a = 0, k = 0; a < s->ndim; a++)
        if (keep[a])
            renum[a] = k++;
    for (int d = 0; d < s->ndim; d++) /* the permutation among the kept axes */
        if (keep[p[d]])
            q[n++] = renum[p[d]];
    int64_t kd[OX_MAX_DIMS];
    for (int a = 0, k = 0; a < s->ndim; a++)
        if (keep[a])
            kd[k++] = s->d[a];
    /* output groups: runs of q where q[d + 1] == q[d] + 1 */
    int n_groups = 0;
    for (int d = 0; d < n; d++) {
        if (d == 0 || q[d] != q[d - 1] + 1)
            first[n_groups++] = q[d];
        group_of[q[d]] = n_groups - 1;
    }
    /* the groups in input order: group g starts at input axis first[g] */
    ms->ndim = 0;
    int in_index[OX_MAX_DIMS];
    for (int a = 0; a < n; a++) {
        int g = group_of[a];
        if (first[g] == a) {
            in_index[g] = ms->ndim;
            ms->d[ms->ndim++] = 1;
        }
        ms->d[in_index[g]] *= kd[a];
    }
    for (int g = 0; g < n_groups; g++)
        mp[g] = in_index[g];
    if (ms->ndim == 0) { /* every axis of size 1 (or none) */
        ms->ndim = 1;
        ms->d[0] = 1;
        mp[0] = 0;
    }
}

/* Node n (holding a value of ONNX shape s, any rank) transposed by p,
 * merged to rank <= TEENY_MAX_DIMS: one view and one graph transpose
 * (neither when nothing moves: *y is n). *y holds the result at its
 * merged rank. */
static teeny_status transpose_step(ox_import *im, teeny_node n, const ox_shape *s, const int *p, teeny_node *y)
{
    ox_shape ms, gs;
    int mp[OX_MAX_DIMS], moves = 0;
    char buf[TEENY__NAME_CAP];
    merge_axes(s, p, &ms, mp);
    if (ms.ndim > TEENY_MAX_DIMS)
        return teeny__ox_fail(im, TEENY_ERR_STATE, "internal: a transpose step of merged rank %d", ms.ndim);
    for (int d = 0; d < ms.ndim; d++)
        moves |= mp[d] != d;
    *y = n;
    if (!moves) /* the elements stay in place: no node */
        return TEENY_OK;
    teeny_status st = teeny__ox_node_shape(im, n, &gs);
    if (st != TEENY_OK || (st = teeny__ox_view_node(im, n, &gs, &ms, y)) != TEENY_OK)
        return st;
    if ((st = teeny_graph_transpose(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), *y, mp, y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    return TEENY_OK;
}

/* Merged rank of moving from axis order cur to axis order next (both
 * lists of the input's axes), whose current shape is cs; rel gets the
 * relative permutation. */
static int step_rank(const ox_shape *cs, const int *cur, const int *next, int *rel)
{
    ox_shape ms;
    int mp[OX_MAX_DIMS];
    for (int d = 0; d < cs->ndim; d++)
        for (int k = 0; k < cs->ndim; k++)
            if (cur[k] == next[d])
                rel[d] = k;
    merge_axes(cs, rel, &ms, mp);
    return ms.ndim;
}

/* Node x (ONNX shape s) transposed by p into ONNX shape o:
 * as few steps as the greedy choice finds, each of merged rank <= 5,
 * along the orders that move one axis at a time into place. */
static teeny_status transpose_runtime(ox_import *im, teeny_node x, const ox_shape *s, const int *p, const ox_shape *o)
{
    int n = s->ndim, orders[OX_MAX_DIMS + 1][OX_MAX_DIMS] = {{0}}, cur[OX_MAX_DIMS], rel[OX_MAX_DIMS];
    teeny_node y = x;
    ox_shape cs = *s;
    teeny_status st;
    for (int a = 0; a < n; a++)
        orders[0][a] = a;
    for (int d = 0; d < n; d++) { /* orders[d + 1]: orders[d] with axis p[d] moved to position d */
        int k = d;
        memcpy(orders[d + 1], orders[d], sizeof orders[d]);
        while (orders[d + 1][k] != p[d])
            k++;
        memmove(&orders[d + 1][d + 1], &orders[d + 1][d], sizeof(int) * (size_t)(k - d));
        orders[d + 1][d] = p[d];
    }
    memcpy(cur, orders[0], sizeof cur);
    for (int at = 0; at < n;) {
        int next = n; /* the farthest order one step of merged rank <= 5 reaches */
        while (next > at + 1 && step_rank(&cs, cur, orders[next], rel) > TEENY_MAX_DIMS)
            next--;
        step_rank(&cs, cur, orders[next], rel);
        if ((st = transpose_step(im, y, &cs, rel, &y)) != TEENY_OK)
            return st;
        ox_shape ns = cs;
        for (int d = 0; d < n; d++)
            ns.d[d] = cs.d[rel[d]];
        cs = ns;
        memcpy(cur, orders[next], sizeof cur);
        at = next;
    }
    ox_shape gs; /* the result as ONNX's shape (wide: kept at the node's rank) */
    if ((st = teeny__ox_node_shape(im, y, &gs)) != TEENY_OK || (st = teeny__ox_view_node(im, y, &gs, o, &y)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, y, o);
}

/* Constant c transposed by p into shape o: folded. */
static teeny_status transpose_const(ox_import *im, const ox_const *c, const int *p, const ox_shape *o)
{
    ox_const r;
    int64_t in_stride[OX_MAX_DIMS], idx[OX_MAX_DIMS] = {0};
    size_t es = teeny__ox_esize(c->type);
    teeny_status st = teeny__ox_const_alloc(im, c->type, c->onnx_type, o, &r);
    if (st != TEENY_OK)
        return teeny__ox_fail(im, st, "%s", teeny_last_error(im->ctx));
    int64_t acc = 1;
    for (int a = c->shape.ndim - 1; a >= 0; a--) {
        in_stride[a] = acc;
        acc *= c->shape.d[a];
    }
    for (int64_t i = 0; i < r.numel; i++) { /* idx: output i's coordinates */
        int64_t src = 0;
        for (int d = 0; d < o->ndim; d++)
            src += idx[d] * in_stride[p[d]];
        memcpy((char *)r.data + (size_t)i * es, (const char *)c->data + (size_t)src * es, es);
        for (int d = o->ndim - 1; d >= 0 && ++idx[d] == o->d[d]; d--)
            idx[d] = 0;
    }
    return teeny__ox_out_const(im, 0, &r);
}

teeny_status teeny__ox_op_transpose(ox_import *im)
{
    static const char *const attrs[] = {"perm", NULL};
    int64_t perm[OX_MAX_DIMS];
    int n, p[OX_MAX_DIMS], seen[OX_MAX_DIMS] = {0}, xi;
    teeny_node x = -1;
    ox_shape s, o;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_ints(im, "perm", OX_MAX_DIMS, perm, &n)) != TEENY_OK ||
        (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK || (st = teeny__ox_in_present(im, 0, "data", &xi)) != TEENY_OK)
        return st;
    const ox_const *c = NULL;
    const ox_value *xv = &im->vals[xi];
    /* folded, but for a float initializer of rank <= 5 (a weight: a graph
     * constant and a transpose node, not a folded copy in the budget) */
    if (xv->kind == OX_CONST && (xv->c.type != OX_F32 || !xv->is_initializer || xv->c.shape.ndim > TEENY_MAX_DIMS)) {
        if ((st = teeny__ox_in_const(im, 0, "data", 0, &c)) != TEENY_OK)
            return st;
        s = c->shape;
    } else if (teeny__ox_is_wide(xv)) {
        s = xv->shape;
        x = xv->node;
    } else if ((st = teeny__ox_operand(im, 0, "data", &x, &s)) != TEENY_OK) {
        return st;
    }
    if (n >= 0 && n != s.ndim)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute perm has %d values for rank %d", n, s.ndim);
    o = s;
    for (int d = 0; d < s.ndim; d++) {
        p[d] = n < 0 ? s.ndim - 1 - d : (int)(perm[d] < 0 || perm[d] >= s.ndim ? -1 : perm[d]);
        if (p[d] < 0 || seen[p[d]]++)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute perm value %lld", (long long)perm[d]);
        o.d[d] = s.d[p[d]];
    }
    if (c)
        return transpose_const(im, c, p, &o);
    return transpose_runtime(im, x, &s, p, &o);
}
