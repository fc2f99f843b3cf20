/*
 * einsum.c -- ONNX Einsum (opset 12) for the contractions transformers
 * export: one operand permuted, or two operands contracted as one batched
 * MatMul between transposes (MaxViT's "B G H I D, B G H J D -> B G H I J"
 * and "B G H I J, B G H J D -> B G H I D"). Labels are letters, spaces
 * are ignored, the output is explicit ("->") or implicit (the labels used
 * once, in alphabetical order). A label of both operands that the output
 * keeps is a batch label, one it drops is contracted; a label of one
 * operand goes to the output. Refused (unsupported, naming the equation):
 * ellipses, a label repeated in one operand (diagonals), a label summed
 * over one operand only, batch and contracted sizes that differ (no
 * broadcasting), three or more operands, results past rank 5.
 */
#include <stdio.h>
#include <string.h>

#include "onnx_internal.h"

#define EQ_CAP 128

typedef struct {
    char in[2][TEENY_MAX_DIMS + 1], out[2 * TEENY_MAX_DIMS + 1];
    int n_in;
} einsum_eq;

static int is_label(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* eq parsed into its terms; 0 for what the importer refuses. */
static int parse(const char *eq, einsum_eq *e)
{
    char term[4][2 * TEENY_MAX_DIMS + 1];
    int n_terms = 0, len = 0, arrow = 0;
    memset(e, 0, sizeof *e);
    for (const char *p = eq;; p++) {
        if (*p == ' ')
            continue;
        if (*p == ',' || *p == '\0' || (p[0] == '-' && p[1] == '>')) {
            if (n_terms == 4 || (arrow && *p == ','))
                return 0;
            term[n_terms][len] = '\0';
            n_terms++;
            len = 0;
            if (*p == '\0')
                break;
            if (*p == '-') {
                if (arrow++)
                    return 0;
                p++;
            }
            continue;
        }
        if (!is_label(*p) || len == 2 * TEENY_MAX_DIMS)
            return 0;
        term[n_terms][len++] = *p;
    }
    e->n_in = n_terms - arrow;
    if (e->n_in < 1 || e->n_in > 2)
        return 0;
    for (int i = 0; i < e->n_in; i++) {
        if (strlen(term[i]) > TEENY_MAX_DIMS)
            return 0;
        for (int k = 0; term[i][k]; k++)
            if (strchr(term[i] + k + 1, term[i][k]))
                return 0; /* a diagonal */
        strcpy(e->in[i], term[i]);
    }
    if (arrow) {
        strcpy(e->out, term[n_terms - 1]);
    } else { /* implicit: the labels used once, alphabetically */
        int len_out = 0;
        for (int c = 0; c < 128; c++) {
            int uses = 0;
            for (int i = 0; i < e->n_in; i++)
                uses += strchr(e->in[i], c) != NULL && c;
            if (uses == 1 && is_label((char)c))
                e->out[len_out++] = (char)c;
        }
        e->out[len_out] = '\0';
    }
    for (int k = 0; e->out[k]; k++) /* output labels: once each, each from an operand */
        if (strchr(e->out + k + 1, e->out[k]) || (!strchr(e->in[0], e->out[k]) && !strchr(e->in[1], e->out[k])))
            return 0;
    return strlen(e->out) <= TEENY_MAX_DIMS;
}

/* x (ONNX shape s, labels have) permuted to the labels want (a
 * permutation of them); s updated. */
static teeny_status permute(ox_import *im, teeny_node *x, ox_shape *s, const char *have, const char *want)
{
    int perm[TEENY_MAX_DIMS], moves = 0;
    ox_shape o = *s;
    char buf[TEENY__NAME_CAP];
    for (int d = 0; d < s->ndim; d++) {
        perm[d] = (int)(strchr(have, want[d]) - have);
        o.d[d] = s->d[perm[d]];
        moves |= perm[d] != d;
    }
    *s = o;
    if (!moves)
        return TEENY_OK;
    teeny_status st = teeny_graph_transpose(im->g, teeny__ox_name(im, "perm", buf, sizeof buf), *x, perm, x);
    return st == TEENY_OK ? TEENY_OK : teeny__ox_graph_fail(im, st);
}

teeny_status teeny__ox_op_einsum(ox_import *im)
{
    static const char *const attrs[] = {"equation", NULL};
    char eq[EQ_CAP];
    einsum_eq e;
    teeny_node x[2];
    ox_shape s[2];
    int64_t size[128] = {0};
    teeny_status st = teeny__ox_attrs_allowed(im, attrs);
    if (st != TEENY_OK || (st = teeny__ox_attr_string(im, "equation", "", eq, sizeof eq)) != TEENY_OK ||
        (st = teeny__ox_outputs_at_most(im, 1)) != TEENY_OK)
        return st;
    if (!teeny__ox_attr(im, "equation"))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute equation is missing");
    if (!parse(eq, &e))
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "equation \"%s\" (supported: one or two operands of letters, "
                              "no ellipsis or repeated label, results up to rank %d)", eq, TEENY_MAX_DIMS);
    if (teeny__ox_n_in(im) != e.n_in)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "equation \"%s\" has %d operands, the node %d inputs", eq, e.n_in,
                              teeny__ox_n_in(im));
    for (int i = 0; i < e.n_in; i++) {
        if ((st = teeny__ox_operand(im, i, "Inputs", &x[i], &s[i])) != TEENY_OK)
            return st;
        if (s[i].ndim != (int)strlen(e.in[i]))
            return teeny__ox_fail(im, TEENY_ERR_SHAPE, "operand %d has rank %d, equation \"%s\" gives it %d labels", i,
                                  s[i].ndim, eq, (int)strlen(e.in[i]));
        for (int d = 0; d < s[i].ndim; d++) {
            int c = e.in[i][d];
            if (size[c] && size[c] != s[i].d[d])
                return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "label %c is %lld in one place and %lld in another "
                                      "(broadcasting is not supported)", c, (long long)size[c], (long long)s[i].d[d]);
            size[c] = s[i].d[d];
        }
    }
    for (int i = 0; i < e.n_in; i++) /* a label summed over one operand only */
        for (int d = 0; e.in[i][d]; d++)
            if (!strchr(e.out, e.in[i][d]) && (e.n_in == 1 || !strchr(e.in[1 - i], e.in[i][d])))
                return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "equation \"%s\" sums label %c over one operand only",
                                      eq, e.in[i][d]);
    if (e.n_in == 1) {
        if ((st = permute(im, &x[0], &s[0], e.in[0], e.out)) != TEENY_OK)
            return st;
        return teeny__ox_out_runtime(im, 0, x[0], &s[0]);
    }
    /* batch labels, A's own, B's own (output order), contracted (A's order) */
    char batch[8] = "", afree[8] = "", bfree[8] = "", contr[8] = "", at[16], bt[16], mid[16];
    int nb = 0, na = 0, nf = 0, nc = 0;
    for (int d = 0; e.out[d]; d++) {
        int ina = strchr(e.in[0], e.out[d]) != NULL, inb = strchr(e.in[1], e.out[d]) != NULL;
        char *list = ina && inb ? batch : ina ? afree : bfree;
        int *n = ina && inb ? &nb : ina ? &na : &nf;
        list[(*n)++] = e.out[d];
        list[*n] = '\0';
    }
    for (int d = 0; e.in[0][d]; d++)
        if (!strchr(e.out, e.in[0][d])) {
            contr[nc++] = e.in[0][d];
            contr[nc] = '\0';
        }
    int64_t bsz = 1, m = 1, k = 1, n = 1;
    for (int d = 0; d < nb; d++)
        bsz *= size[(int)batch[d]];
    for (int d = 0; d < na; d++)
        m *= size[(int)afree[d]];
    for (int d = 0; d < nc; d++)
        k *= size[(int)contr[d]];
    for (int d = 0; d < nf; d++)
        n *= size[(int)bfree[d]];
    snprintf(at, sizeof at, "%s%s%s", batch, afree, contr);
    snprintf(bt, sizeof bt, "%s%s%s", batch, contr, bfree);
    snprintf(mid, sizeof mid, "%s%s%s", batch, afree, bfree);
    ox_shape a3 = {3, {bsz, m, k}}, b3 = {3, {bsz, k, n}}, ms = {0}, ys;
    teeny_node y;
    char buf[TEENY__NAME_CAP];
    if ((st = permute(im, &x[0], &s[0], e.in[0], at)) != TEENY_OK ||
        (st = permute(im, &x[1], &s[1], e.in[1], bt)) != TEENY_OK ||
        (st = teeny__ox_view_node(im, x[0], &s[0], &a3, &x[0])) != TEENY_OK ||
        (st = teeny__ox_view_node(im, x[1], &s[1], &b3, &x[1])) != TEENY_OK)
        return st;
    if ((st = teeny_graph_matmul(im->g, teeny__ox_name(im, NULL, buf, sizeof buf), x[0], x[1], &y)) != TEENY_OK)
        return teeny__ox_graph_fail(im, st);
    for (int d = 0; mid[d]; d++)
        ms.d[ms.ndim++] = size[(int)mid[d]];
    if ((st = teeny__ox_node_shape(im, y, &ys)) != TEENY_OK || (st = teeny__ox_view_node(im, y, &ys, &ms, &y)) != TEENY_OK ||
        (st = permute(im, &y, &ms, mid, e.out)) != TEENY_OK)
        return st;
    return teeny__ox_out_runtime(im, 0, y, &ms);
}
