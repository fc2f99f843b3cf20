/*
 * einsum.c -- ONNX Einsum of one or two operands, lowered at import onto
 * the graph's ReduceSum, Transpose, views and MatMul (no kernel of its
 * own; gradients are theirs). Each label is classified:
 *   batch       in both operands and the output
 *   left/right  in one operand and the output
 *   contracted  in both operands, not the output
 *   summed      in one operand only: reduced before the product
 * Operand A is transposed to [batch, left, contracted] and viewed as
 * [batch..., L, K], B to [batch, contracted, right] as [batch..., K, R];
 * their MatMul [batch..., L, R] is viewed back to [batch, left, right]
 * and transposed to the output's order. One operand: summed labels
 * reduced, the rest transposed. Refused with the equation named:
 * ellipses, a label twice in one operand (diagonals), more than two
 * operands, labels whose sizes differ.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "onnx_internal.h"

#define OX_EINSUM_MAX_EQ 128

typedef struct {
    int n_ops;                     /* 1 or 2 */
    char in[2][OX_MAX_DIMS + 1];   /* labels per operand axis */
    char out[OX_MAX_DIMS + 1];
} ox_einsum;

/* The equation's labels; the output's implied (the labels seen once, in
 * alphabetical order) when there is no "->". */
static teeny_status parse(ox_import *im, const char *eq, ox_einsum *e)
{
    char clean[OX_EINSUM_MAX_EQ];
    int n = 0, term = 0, len = 0, arrow = 0;
    memset(e, 0, sizeof *e);
    for (const char *p = eq; *p; p++)
        if (*p != ' ') {
            if (n + 1 >= (int)sizeof clean)
                return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "equation \"%.40s...\" is too long", eq);
            clean[n++] = *p;
        }
    clean[n] = 0;
    if (strstr(clean, "..."))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "equation \"%s\": ellipses (...) are not supported", clean);
    for (const char *p = clean; *p; p++) {
        char *dst = arrow ? e->out : e->in[term];
        if (*p == ',' && !arrow) {
            e->in[term][len] = 0;
            if (++term >= 2)
                return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "equation \"%s\": more than two operands", clean);
            len = 0;
        } else if (*p == '-' && p[1] == '>' && !arrow) {
            e->in[term][len] = 0;
            arrow = 1;
            len = 0;
            p++;
        } else if (isalpha((unsigned char)*p)) {
            if (len >= OX_MAX_DIMS)
                return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "equation \"%s\": a term of more than %d labels", clean,
                                      OX_MAX_DIMS);
            if (memchr(dst, *p, (size_t)len))
                return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "equation \"%s\": label %c twice in one term (diagonals "
                                      "are not supported)", clean, *p);
            dst[len++] = *p;
        } else
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "equation \"%s\": character '%c'", clean, *p);
    }
    (arrow ? e->out : e->in[term])[len] = 0;
    e->n_ops = term + 1;
    if (!arrow) { /* implicit output: labels that appear once, sorted */
        int k = 0;
        for (int c = 0; c < 256; c++) {
            int seen = 0;
            for (int t = 0; t < e->n_ops; t++)
                seen += strchr(e->in[t], c) != NULL && c;
            if (seen == 1 && isalpha(c))
                e->out[k++] = (char)c;
        }
        e->out[k] = 0;
    }
    for (const char *p = e->out; *p; p++) {
        int found = 0;
        for (int t = 0; t < e->n_ops; t++)
            found |= strchr(e->in[t], *p) != NULL;
        if (!found)
            return teeny__ox_fail(im, TEENY_ERR_FORMAT, "equation \"%s\": output label %c is in no input", clean, *p);
    }
    return TEENY_OK;
}

/* x (ONNX shape *s, labels lab) with its labels in neither keep1 nor
 * keep2 (NULL: none) summed away; *s and lab follow. */
static teeny_status sum_labels(ox_import *im, teeny_node *x, ox_shape *s, char *lab, const char *keep1, const char *keep2)
{
    unsigned mask = 0;
    ox_shape o = {0};
    char nl[OX_MAX_DIMS + 1];
    int k = 0;
    for (int d = 0; d < s->ndim; d++) {
        if (!strchr(keep1, lab[d]) && !(keep2 && strchr(keep2, lab[d])))
            mask |= 1u << d;
        else {
            nl[k] = lab[d];
            o.d[k++] = s->d[d];
        }
    }
    if (!mask)
        return TEENY_OK;
    char buf[TEENY__NAME_CAP];
    teeny_reduce_params p = {mask, 0, 0};
    teeny_status st = teeny_graph_reduce(im->g, teeny__ox_name(im, "sum", buf, sizeof buf), *x, &p, x);
    if (st != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    o.ndim = k; /* 0 when everything is summed: an ONNX scalar, the graph's [1] */
    nl[k] = 0;
    *s = o;
    memcpy(lab, nl, (size_t)k + 1);
    return TEENY_OK;
}

/* x (shape *s, labels lab) transposed to the labels' order in want (a
 * permutation of lab); no node when already in order. */
static teeny_status to_order(ox_import *im, teeny_node *x, ox_shape *s, char *lab, const char *want)
{
    int p[TEENY_MAX_DIMS], moved = 0;
    ox_shape o = *s;
    if (s->ndim > TEENY_MAX_DIMS)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "a transpose of rank %d (supported: 1..5)", s->ndim);
    for (int d = 0; d < s->ndim; d++) {
        p[d] = (int)(strchr(lab, want[d]) - lab);
        o.d[d] = s->d[p[d]];
        moved |= p[d] != d;
    }
    if (!moved)
        return TEENY_OK;
    char buf[TEENY__NAME_CAP];
    teeny_status st = teeny_graph_transpose(im->g, teeny__ox_name(im, "perm", buf, sizeof buf), *x, p, x);
    if (st != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    *s = o;
    memcpy(lab, want, (size_t)s->ndim + 1);
    return TEENY_OK;
}

/* The size of label c in operand shape s (labels lab). */
static int64_t size_of(const ox_shape *s, const char *lab, char c)
{
    return s->d[strchr(lab, c) - lab];
}

/* Two operands: the batched product. */
static teeny_status contract(ox_import *im, const ox_einsum *e, teeny_node a, ox_shape sa, teeny_node b, ox_shape sb,
                             teeny_node *y, ox_shape *sy)
{
    char la[OX_MAX_DIMS + 1], lb[OX_MAX_DIMS + 1], batch[OX_MAX_DIMS + 1] = "", left[OX_MAX_DIMS + 1] = "",
         right[OX_MAX_DIMS + 1] = "", con[OX_MAX_DIMS + 1] = "", want[OX_MAX_DIMS + 1];
    int nb = 0, nl = 0, nr = 0, nc = 0;
    teeny_status st;
    strcpy(la, e->in[0]);
    strcpy(lb, e->in[1]);
    /* labels in one operand only and not in the output are summed first */
    if ((st = sum_labels(im, &a, &sa, la, e->out, lb)) != TEENY_OK ||
        (st = sum_labels(im, &b, &sb, lb, e->out, la)) != TEENY_OK)
        return st;
    for (const char *p = la; *p; p++) {
        int in_b = strchr(lb, *p) != NULL, in_out = strchr(e->out, *p) != NULL;
        if (in_b && size_of(&sa, la, *p) != size_of(&sb, lb, *p))
            return teeny__ox_fail(im, TEENY_ERR_SHAPE, "label %c has size %lld in one operand, %lld in the other", *p,
                                  (long long)size_of(&sa, la, *p), (long long)size_of(&sb, lb, *p));
        if (in_b && in_out)
            batch[nb++] = *p;
        else if (in_b)
            con[nc++] = *p;
        else
            left[nl++] = *p;
    }
    for (const char *p = lb; *p; p++)
        if (!strchr(la, *p))
            right[nr++] = *p;
    batch[nb] = left[nl] = right[nr] = con[nc] = 0;
    int64_t L = 1, K = 1, R = 1;
    for (int i = 0; i < nl; i++)
        L *= size_of(&sa, la, left[i]);
    for (int i = 0; i < nc; i++)
        K *= size_of(&sa, la, con[i]);
    for (int i = 0; i < nr; i++)
        R *= size_of(&sb, lb, right[i]);
    /* A as [batch..., L, K], B as [batch..., K, R] */
    snprintf(want, sizeof want, "%s%s%s", batch, left, con);
    if ((st = to_order(im, &a, &sa, la, want)) != TEENY_OK)
        return st;
    snprintf(want, sizeof want, "%s%s%s", batch, con, right);
    if ((st = to_order(im, &b, &sb, lb, want)) != TEENY_OK)
        return st;
    ox_shape va = {nb + 2, {0}}, vb = {nb + 2, {0}}, vy = {nb + 2, {0}}, o = {0};
    for (int i = 0; i < nb; i++)
        va.d[i] = vb.d[i] = vy.d[i] = o.d[o.ndim++] = size_of(&sa, la, batch[i]);
    va.d[nb] = L, va.d[nb + 1] = K;
    vb.d[nb] = K, vb.d[nb + 1] = R;
    vy.d[nb] = L, vy.d[nb + 1] = R;
    for (int i = 0; i < nl; i++)
        o.d[o.ndim++] = size_of(&sa, la, left[i]);
    for (int i = 0; i < nr; i++)
        o.d[o.ndim++] = size_of(&sb, lb, right[i]);
    char buf[TEENY__NAME_CAP];
    if ((st = teeny__ox_view_node(im, a, &sa, &va, &a)) != TEENY_OK ||
        (st = teeny__ox_view_node(im, b, &sb, &vb, &b)) != TEENY_OK)
        return st;
    if ((st = teeny_graph_matmul(im->g, teeny__ox_name(im, "matmul", buf, sizeof buf), a, b, y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    if ((st = teeny__ox_view_node(im, *y, &vy, &o, y)) != TEENY_OK)
        return st;
    char lo[OX_MAX_DIMS + 1];
    snprintf(lo, sizeof lo, "%s%s%s", batch, left, right);
    *sy = o;
    return to_order(im, y, sy, lo, e->out);
}

teeny_status teeny__ox_op_einsum(ox_import *im)
{
    static const char *const attrs[] = {"equation", NULL};
    char eq[OX_EINSUM_MAX_EQ];
    ox_einsum e;
    teeny_node x[2], y;
    ox_shape s[2], sy;
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK)
        return st;
    if (!teeny__ox_attr(im, "equation"))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute equation is missing");
    if ((st = teeny__ox_attr_string(im, "equation", "", eq, sizeof eq)) != TEENY_OK || (st = parse(im, eq, &e)) != TEENY_OK)
        return st;
    if (teeny__ox_n_in(im) != e.n_ops)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "equation \"%s\" has %d operands, the node %d inputs", eq, e.n_ops,
                              teeny__ox_n_in(im));
    for (int t = 0; t < e.n_ops; t++) {
        if ((st = teeny__ox_operand(im, t, "Inputs", &x[t], &s[t])) != TEENY_OK)
            return st;
        if (s[t].ndim != (int)strlen(e.in[t]))
            return teeny__ox_fail(im, TEENY_ERR_SHAPE, "equation \"%s\": operand %d has rank %d, its term %d labels", eq, t,
                                  s[t].ndim, (int)strlen(e.in[t]));
    }
    if (e.n_ops == 2) {
        if ((st = contract(im, &e, x[0], s[0], x[1], s[1], &y, &sy)) != TEENY_OK)
            return st;
    } else {
        char lab[OX_MAX_DIMS + 1];
        strcpy(lab, e.in[0]);
        y = x[0];
        sy = s[0];
        if ((st = sum_labels(im, &y, &sy, lab, e.out, NULL)) != TEENY_OK || (st = to_order(im, &y, &sy, lab, e.out)) != TEENY_OK)
            return st;
        if (y == x[0] && (st = teeny__ox_view_node(im, y, &sy, &sy, &y)) != TEENY_OK)
            return st;
    }
    return teeny__ox_out_runtime(im, 0, y, &sy);
}
