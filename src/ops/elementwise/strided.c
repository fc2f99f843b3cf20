/*
 * strided.c -- the strided copy and the strided sum (cl/strided.cl) that
 * the layout ops (layout.c), the reductions and the NumPy-broadcasting
 * binary ops share, and those two ops:
 *   reduce: y = sum (or mean) of x over the axes in attrs.reduce.axes (a
 *           bit per axis), kept as size 1 (keepdims) or removed (a result
 *           with no axis left is [1]); backward: dx = dy broadcast back
 *           (/ count for the mean).
 *   binary: y = a op b (add, sub, mul, div, pow) with NumPy broadcasting;
 *           backward: each operand's term dy * d(a op b) summed over the
 *           dimensions that operand was broadcast along.
 * Sums run in one fixed order (ascending over the reduced index space,
 * split into at most 64 parts summed in order by a second launch), so the
 * same inputs give the same bits; a part's loop stays within the
 * device's loop budget (teeny__loop_budget).
 *
 * Op-table entries (slots TEENY__REDUCE_*, TEENY__BINARY_*: ops.h):
 *   reduce: forward in = [x], out = [y]; backward in = [x, y, dy], out = [dx]
 *   binary: forward in = [a, b], out = [y];
 *           backward in = [a, b, y, dy], out = [da, db] (either may be NULL)
 */
#include <string.h>

#include "../ops.h"

#define ST_MAX_PARTS 64

void teeny__st_contiguous(const int64_t *shape, int ndim, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d];
    }
}

teeny__st_copy_args teeny__st_copy_init(int ndim, const int64_t *space)
{
    teeny__st_copy_args c;
    memset(&c, 0, sizeof c);
    c.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        c.n[d] = space[d];
        c.hi[d] = space[d];
    }
    c.scale = 1.0f;
    c.map_axis = -1;
    return c;
}

/* v[0..ndim) into the last ndim components of an int8, the rest fill. */
static cl_int8 int8_of(const int64_t *v, int ndim, int fill)
{
    cl_int8 r;
    for (int d = 0; d < 8; d++)
        r.s[d] = fill;
    for (int d = 0; d < ndim; d++)
        r.s[8 - ndim + d] = (cl_int)v[d];
    return r;
}

static int64_t product(const int64_t *v, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= v[i];
    return p;
}

/* Squeezes, in place, the index space n[0..ndim) (outermost first) that
 * nt tensors step through with the strides s[0..nt): a dimension of size 1
 * is dropped, and a dimension is merged into the one inside it where every
 * tensor steps through the two as one (s[d] == s[d + 1] * n[d + 1]; a
 * contiguous written tensor always does, so it needs no strides here).
 * Dimensions in keep (bit d) stay as they are. from[r] (may be NULL) gets
 * the input dimension that output dimension r ends with. Each item still
 * reaches the same elements, in the same order, with fewer divisions in
 * the kernel (cl/strided.cl's rank). Returns the rank left, at least 1. */
static int squeeze(int ndim, int64_t *n, int64_t *const *s, int nt, unsigned keep, int *from)
{
    int r = 0;
    unsigned kept = 0;
    for (int d = 0; d < ndim; d++) {
        int fixed = (int)(keep >> d) & 1, merge = r > 0 && !fixed && !(kept >> (r - 1) & 1);
        if (n[d] == 1 && !fixed)
            continue;
        for (int t = 0; t < nt && merge; t++)
            merge = s[t][r - 1] == s[t][d] * n[d];
        if (merge) {
            n[r - 1] *= n[d];
        } else {
            n[r] = n[d];
            kept |= (unsigned)fixed << r;
            r++;
        }
        for (int t = 0; t < nt; t++)
            s[t][r - 1] = s[t][d];
        if (from)
            from[r - 1] = d;
    }
    if (r == 0) {
        n[0] = 1;
        for (int t = 0; t < nt; t++)
            s[t][0] = 0;
        if (from)
            from[0] = ndim - 1;
        r = 1;
    }
    return r;
}

/* st_copy_rows: rows of the innermost dimension shorter than this take
 * st_copy (an item per element), where an item's own cost would outweigh
 * a short run. */
#define ST_ROWS_MIN 16
/* st_binary_rows takes rows of at least this many elements (4 an item
 * already beat one an item, at the four's coordinate walk). */
#define ST_BIN_ROWS_MIN 4

/* st_copy_rows' and st_binary_rows' elements an item: the run, at most
 * 4096, fewer where the device's loop budget ends an item's loops sooner
 * (3 loops over the chunk's elements, + 3: st_binary_rows' two fewer). */
static teeny_status rows_chunk(teeny_ctx *ctx, int run, int *chunk)
{
    int64_t budget, c = run < 4096 ? run : 4096;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    while (st == TEENY_OK && c > 1 && c + 3 > budget)
        c /= 2;
    *chunk = (int)c;
    return st;
}

teeny_status teeny__st_copy(teeny_ctx *ctx, const teeny__st_copy_args *c)
{
    static const char name[] = "st_copy";
    int64_t sn[8], sxs[8], sys[8], slo[8], shi[8], *strides[2] = {sxs, sys};
    int from[8], total = (int)product(c->n, c->ndim), map_axis = -1;
    unsigned keep = 0;
    for (int d = 0; d < c->ndim; d++) {
        sn[d] = c->n[d];
        sxs[d] = c->xs[d];
        sys[d] = c->ys[d];
        if (c->lo[d] != 0 || c->hi[d] != c->n[d] || d == c->map_axis)
            keep |= 1u << d;
    }
    int rank = squeeze(c->ndim, sn, strides, 2, keep, from);
    for (int r = 0; r < rank; r++) {
        int kept = (int)(keep >> from[r]) & 1;
        slo[r] = kept ? c->lo[from[r]] : 0;
        shi[r] = kept ? c->hi[from[r]] : sn[r];
        if (from[r] == c->map_axis)
            map_axis = 8 - rank + r;
    }
    cl_int8 xs = int8_of(sxs, rank, 0), ys = int8_of(sys, rank, 0), n = int8_of(sn, rank, 1);
    cl_int8 lo = int8_of(slo, rank, 0), hi = int8_of(shi, rank, 1);
    cl_mem map = c->map ? c->map : c->x; /* a stand-in never read without a map axis */
    cl_kernel k;
    if (total < 1)
        return TEENY_OK;
    int run = (int)sn[rank - 1], rows = total / run, chunk = 0;
    if (ctx->tune.variant == TEENY_VARIANT_CPU && ctx->hooks.strided_rows >= 0 && run >= ST_ROWS_MIN) {
        teeny_status st = rows_chunk(ctx, run, &chunk);
        if (st != TEENY_OK)
            return st;
        size_t q = (size_t)((run + chunk - 1) / chunk), l1 = teeny__cpu_local(ctx, q * (size_t)rows);
        size_t global[2] = {q, ((size_t)rows + l1 - 1) / l1 * l1}, local[2] = {1, l1};
        teeny__karg a[] = {TEENY__KARG_MEM(c->x), TEENY__KARG_INT(c->x_off), TEENY__KARG(xs),
                           TEENY__KARG_MEM(c->y), TEENY__KARG_INT(c->y_off), TEENY__KARG(ys),
                           TEENY__KARG(n),        TEENY__KARG_INT(rank),     TEENY__KARG(lo),
                           TEENY__KARG(hi),       TEENY__KARG(c->pad),       TEENY__KARG(c->scale),
                           TEENY__KARG_MEM(map),  TEENY__KARG_INT(c->map_off), TEENY__KARG_INT(map_axis),
                           TEENY__KARG_INT(c->map_dim), TEENY__KARG_INT(rows), TEENY__KARG_INT(chunk)};
        return teeny__run_kernel(ctx, "strided", "", "st_copy_rows", a, (int)(sizeof a / sizeof a[0]), 2, global,
                                 local);
    }
    teeny_status st = teeny__kernel_get(ctx, "strided", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &c->x, sizeof(int), &c->x_off, sizeof xs, &xs,
                             sizeof(cl_mem), &c->y, sizeof(int), &c->y_off, sizeof ys, &ys, sizeof n, &n,
                             sizeof(int), &rank, sizeof lo, &lo, sizeof hi, &hi, sizeof(float), &c->pad,
                             sizeof(float), &c->scale, sizeof(cl_mem), &map, sizeof(int), &c->map_off, sizeof(int),
                             &map_axis, sizeof(int), &c->map_dim, sizeof(int), &total, (size_t)0);
    if (st == TEENY_OK)
        st = teeny__launch_1d(ctx, k, name, (size_t)total);
    return st;
}

/* How many parts the sums over r elements of n_out outputs take: enough
 * for the device to have work when n_out is small, each part within the
 * loop budget; TEENY_ERR_UNSUPPORTED when even 64 parts pass it. */
static teeny_status plan_parts(teeny_ctx *ctx, int64_t n_out, int64_t r, int *parts, int *chunk)
{
    int64_t budget, target = (int64_t)(ctx->info.compute_units ? ctx->info.compute_units : 1) * 256, p = 1;
    teeny_status st = teeny__loop_budget(ctx, &budget);
    if (st != TEENY_OK)
        return st;
    if (n_out < target && r >= 1024) /* few outputs, long sums: parts give the device work */
        p = (target + n_out - 1) / n_out;
    if (p > r / 256 + 1)
        p = r / 256 + 1;
    int64_t need = r / budget + (r % budget != 0); /* ceil(r / budget): r + budget - 1 overflows when unlimited */
    if (p < need)                                  /* each part within the loop budget */
        p = need;
    if (p > ST_MAX_PARTS)
        p = ST_MAX_PARTS;
    if (r > 0 && (r + p - 1) / p > budget)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED,
                            "a sum of %lld elements needs more than %d parts of %lld loop trips (%s ends a kernel's "
                            "loops after %lld)", (long long)r, ST_MAX_PARTS, (long long)budget,
                            ctx->info.device_name, (long long)ctx->prog.loop_limit);
    *chunk = r > 0 ? (int)((r + p - 1) / p) : 1;
    *parts = r > 0 ? (int)((r + *chunk - 1) / *chunk) : 1;
    return TEENY_OK;
}

/* A space squeezed (squeeze()) for st_reduce: sizes, x's strides, rank. */
typedef struct {
    cl_int8 n, s;
    int rank;
} st_space;

static st_space space_of(int ndim, int64_t *n, int64_t *s)
{
    int64_t *strides[1] = {s};
    int rank = squeeze(ndim, n, strides, 1, 0, NULL);
    return (st_space){int8_of(n, rank, 1), int8_of(s, rank, 0), rank};
}

static teeny_status reduce_launch(teeny_ctx *ctx, cl_mem x, int x_off, const st_space *o, const st_space *r,
                                  float scale, cl_mem y, int y_off, int n_out, int parts, int chunk, int r_total)
{
    static const char name[] = "st_reduce";
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "strided", "", name, &k);
    if (st == TEENY_OK)
        st = teeny__set_args(ctx, k, name, sizeof(cl_mem), &x, sizeof(int), &x_off, sizeof o->n, &o->n,
                             sizeof o->s, &o->s, sizeof(int), &o->rank, sizeof r->n, &r->n, sizeof r->s, &r->s,
                             sizeof(int), &r->rank, sizeof(float), &scale, sizeof(cl_mem), &y, sizeof(int), &y_off,
                             sizeof(int), &n_out, sizeof(int), &parts, sizeof(int), &chunk, sizeof(int), &r_total,
                             (size_t)0);
    if (st == TEENY_OK)
        st = teeny__launch_1d(ctx, k, name, (size_t)((int64_t)n_out * parts));
    return st;
}

teeny_status teeny__st_reduce(teeny_ctx *ctx, cl_mem x, int x_off, int ndim, const int64_t *dims, const int64_t *xs,
                              unsigned mask, float scale, cl_mem y, int y_off)
{
    int64_t on[8], os[8], rn[8], rs[8];
    int n_o = 0, n_r = 0, parts = 1, chunk = 1;
    for (int d = 0; d < ndim; d++) {
        if (mask & (1u << d)) {
            rn[n_r] = dims[d];
            rs[n_r++] = xs[d];
        } else {
            on[n_o] = dims[d];
            os[n_o++] = xs[d];
        }
    }
    int64_t n_out = product(on, n_o), r = product(rn, n_r);
    teeny_status st = plan_parts(ctx, n_out, r, &parts, &chunk);
    if (st != TEENY_OK || n_out < 1)
        return st;
    st_space os8 = space_of(n_o, on, os), rs8 = space_of(n_r, rn, rs);
    if (parts == 1)
        return reduce_launch(ctx, x, x_off, &os8, &rs8, scale, y, y_off, (int)n_out, 1, chunk, (int)r);
    cl_mem part;
    if ((st = teeny__scratch(ctx, (size_t)(n_out * parts) * sizeof(float), &part)) != TEENY_OK ||
        (st = reduce_launch(ctx, x, x_off, &os8, &rs8, 1.0f, part, 0, (int)n_out, parts, chunk, (int)r)) != TEENY_OK)
        return st;
    /* the parts of output o are part[o*parts .. +parts): summed in order */
    int64_t po[1] = {n_out}, pos[1] = {parts}, pr[1] = {parts}, prs[1] = {1};
    st_space ps = space_of(1, po, pos), pr1 = space_of(1, pr, prs);
    return reduce_launch(ctx, part, 0, &ps, &pr1, scale, y, y_off, (int)n_out, 1, parts, parts);
}

teeny_status teeny__st_broadcast_strides(const teeny__shape *x, const teeny__shape *y, int64_t *strides)
{
    int64_t xs[TEENY_MAX_DIMS];
    teeny__st_contiguous(x->shape, x->ndim, xs);
    for (int d = 0; d < y->ndim; d++) {
        int j = d - (y->ndim - x->ndim);
        strides[d] = j < 0 || x->shape[j] == 1 ? 0 : xs[j];
        if (j >= 0 && x->shape[j] != 1 && x->shape[j] != y->shape[d])
            return TEENY_ERR_SHAPE;
    }
    return TEENY_OK;
}

unsigned teeny__st_broadcast_mask(const teeny__shape *x, const teeny__shape *y)
{
    unsigned mask = 0;
    for (int d = 0; d < y->ndim; d++) {
        int j = d - (y->ndim - x->ndim);
        if ((j < 0 || x->shape[j] == 1) && y->shape[d] != 1)
            mask |= 1u << d;
    }
    return mask;
}

/* ---- reduce ---- */

static teeny__shape shape_of_t(const teeny_tensor *t)
{
    return teeny__shape_of(t);
}

teeny_status teeny__reduce_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *x = a->in[TEENY__REDUCE_X];
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    const teeny__reduce_attrs *at = &a->attrs.reduce;
    int64_t xs[TEENY_MAX_DIMS];
    teeny__st_contiguous(x->shape, x->ndim, xs);
    float scale = at->mean ? (float)((double)y->numel / (double)x->numel) : 1.0f;
    return teeny__st_reduce(ctx, x->buf, teeny__off(x), x->ndim, x->shape, xs, at->axes, scale, y->buf,
                            teeny__off(y));
}

/* dx = dy (/ count) at every position of the reduced axes. */
teeny_status teeny__reduce_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dy = a->in[TEENY__REDUCE_DY];
    teeny_tensor *dx = a->out[TEENY__REDUCE_X];
    if (!dx)
        return TEENY_OK;
    const teeny__reduce_attrs *at = &a->attrs.reduce;
    teeny__st_copy_args c = teeny__st_copy_init(dx->ndim, dx->shape);
    int64_t kept[TEENY_MAX_DIMS], ks[TEENY_MAX_DIMS];
    int nk = 0;
    for (int d = 0; d < dx->ndim; d++)
        if (!(at->axes & (1u << d)))
            kept[nk++] = dx->shape[d];
    teeny__st_contiguous(kept, nk, ks);
    teeny__st_contiguous(dx->shape, dx->ndim, c.ys);
    for (int d = 0, j = 0; d < dx->ndim; d++)
        c.xs[d] = at->axes & (1u << d) ? 0 : ks[j++];
    c.x = dy->buf;
    c.x_off = teeny__off(dy);
    c.y = dx->buf;
    c.y_off = teeny__off(dx);
    c.scale = at->mean ? (float)((double)dy->numel / (double)dx->numel) : 1.0f;
    return teeny__st_copy(ctx, &c);
}

/* x of rank 1..5; axes a non-empty subset of x's; y keeps them as 1 or
 * drops them ([1] when none is left). */
teeny_status teeny__reduce_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *x = &s->in[0];
    const teeny__reduce_attrs *at = &s->attrs.reduce;
    char b[96];
    if (s->n_in != 1 || x->is_i32 || x->ndim < 1)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "x has shape %s%s; expected fp32",
                            teeny__dims_str(x->shape, x->ndim, b, sizeof b), x->is_i32 ? " int32" : "");
    if (!at->axes || (at->axes >> x->ndim) || (at->keepdims != 0 && at->keepdims != 1) ||
        (at->mean != 0 && at->mean != 1))
        return teeny__error(ctx, TEENY_ERR_ARG, "axes 0x%x must be a non-empty set of x's %d axes, keepdims %d and mean "
                            "%d 0 or 1", at->axes, x->ndim, at->keepdims, at->mean);
    s->out = (teeny__shape){0};
    for (int d = 0; d < x->ndim; d++)
        if (!(at->axes & (1u << d)) || at->keepdims)
            s->out.shape[s->out.ndim++] = at->axes & (1u << d) ? 1 : x->shape[d];
    if (!s->out.ndim)
        s->out = (teeny__shape){.ndim = 1, .shape = {1}};
    s->n_param = s->n_state = s->n_saved = 0;
    return TEENY_OK;
}

/* ---- binary ---- */

static teeny_status binary_launch(teeny_ctx *ctx, const char *name, int op, int wrt, const teeny_tensor *a,
                                  const teeny_tensor *b, const teeny_tensor *dy, cl_mem out, int out_off,
                                  const teeny__shape *ys)
{
    int64_t as[TEENY_MAX_DIMS], bs[TEENY_MAX_DIMS], n[TEENY_MAX_DIMS], *strides[2] = {as, bs};
    teeny__shape sa = shape_of_t(a), sb = shape_of_t(b);
    teeny__st_broadcast_strides(&sa, ys, as);
    teeny__st_broadcast_strides(&sb, ys, bs);
    memcpy(n, ys->shape, sizeof n);
    int rank = squeeze(ys->ndim, n, strides, 2, 0, NULL);
    cl_int8 a8 = int8_of(as, rank, 0), b8 = int8_of(bs, rank, 0), n8 = int8_of(n, rank, 1);
    int total = (int)product(ys->shape, ys->ndim), a_off = teeny__off(a), b_off = teeny__off(b);
    /* the CPU variant's forward: a row an item where the innermost dimension
     * allows (st_binary_rows; the test hook BINARY_ROWS -1: never):
     * EfficientNet-B0's broadcasting Muls and Adds, 1.97 -> 0.80 ms a forward
     * on PoCL 3.1 (4 elements an item before: 1.6x faster than one) */
    if (!dy && op <= 3 && ctx->tune.variant == TEENY_VARIANT_CPU && ctx->hooks.binary_rows >= 0 && rank > 0 &&
        n[rank - 1] >= ST_BIN_ROWS_MIN && (as[rank - 1] == 0 || as[rank - 1] == 1) &&
        (bs[rank - 1] == 0 || bs[rank - 1] == 1)) {
        int run = (int)n[rank - 1], rows = total / run, chunk;
        teeny_status st = rows_chunk(ctx, run, &chunk);
        if (st != TEENY_OK)
            return st;
        size_t q = (size_t)((run + chunk - 1) / chunk), l1 = teeny__cpu_local(ctx, q * (size_t)rows);
        size_t global[2] = {q, ((size_t)rows + l1 - 1) / l1 * l1}, local[2] = {1, l1};
        teeny__karg k[] = {TEENY__KARG_INT(op),  TEENY__KARG_MEM(a->buf), TEENY__KARG_INT(a_off), TEENY__KARG(a8),
                           TEENY__KARG_MEM(b->buf), TEENY__KARG_INT(b_off), TEENY__KARG(b8), TEENY__KARG_MEM(out),
                           TEENY__KARG_INT(out_off), TEENY__KARG(n8), TEENY__KARG_INT(rank), TEENY__KARG_INT(rows),
                           TEENY__KARG_INT(chunk)};
        return teeny__run_kernel(ctx, "strided", "", "st_binary_rows", k, (int)(sizeof k / sizeof k[0]), 2, global,
                                 local);
    }
    cl_kernel k;
    teeny_status st = teeny__kernel_get(ctx, "strided", "", name, &k);
    if (st == TEENY_OK && !dy)
        st = teeny__set_args(ctx, k, name, sizeof(int), &op, sizeof(cl_mem), &a->buf, sizeof(int), &a_off,
                             sizeof a8, &a8, sizeof(cl_mem), &b->buf, sizeof(int), &b_off, sizeof b8, &b8,
                             sizeof(cl_mem), &out, sizeof(int), &out_off, sizeof n8, &n8, sizeof(int), &rank,
                             sizeof(int), &total, (size_t)0);
    else if (st == TEENY_OK) {
        int dy_off = teeny__off(dy);
        st = teeny__set_args(ctx, k, name, sizeof(int), &op, sizeof(int), &wrt, sizeof(cl_mem), &a->buf, sizeof(int),
                             &a_off, sizeof a8, &a8, sizeof(cl_mem), &b->buf, sizeof(int), &b_off, sizeof b8, &b8,
                             sizeof(cl_mem), &dy->buf, sizeof(int), &dy_off, sizeof(cl_mem), &out, sizeof(int),
                             &out_off, sizeof n8, &n8, sizeof(int), &rank, sizeof(int), &total, (size_t)0);
    }
    if (st == TEENY_OK)
        st = teeny__launch_1d(ctx, k, name, (size_t)total);
    return st;
}

teeny_status teeny__binary_forward(teeny_ctx *ctx, const teeny__op_args *a)
{
    teeny_tensor *y = a->out[TEENY__OUT_VALUE];
    teeny__shape ys = shape_of_t(y);
    return binary_launch(ctx, "st_binary_forward", (int)a->attrs.binary.op, 0, a->in[TEENY__BINARY_A],
                         a->in[TEENY__BINARY_B], NULL, y->buf, teeny__off(y), &ys);
}

/* Operand i's gradient: its term, summed over the dimensions it was
 * broadcast along (through workspace of y's size), or written straight
 * into it when it has y's shape. */
teeny_status teeny__binary_backward(teeny_ctx *ctx, const teeny__op_args *a)
{
    const teeny_tensor *dy = a->in[TEENY__BINARY_DY];
    teeny__shape ys = shape_of_t(dy);
    teeny_status st = TEENY_OK;
    for (int i = 0; i < 2 && st == TEENY_OK; i++) {
        teeny_tensor *g = a->out[i];
        if (!g)
            continue;
        teeny__shape gs = shape_of_t(g);
        unsigned mask = teeny__st_broadcast_mask(&gs, &ys);
        if (!mask) {
            st = binary_launch(ctx, "st_binary_term", (int)a->attrs.binary.op, i, a->in[TEENY__BINARY_A],
                               a->in[TEENY__BINARY_B], dy, g->buf, teeny__off(g), &ys);
            continue;
        }
        cl_mem t;
        int64_t ts[TEENY_MAX_DIMS];
        teeny__st_contiguous(ys.shape, ys.ndim, ts);
        if ((st = teeny__scratch(ctx, (size_t)dy->numel * sizeof(float), &t)) == TEENY_OK &&
            (st = binary_launch(ctx, "st_binary_term", (int)a->attrs.binary.op, i, a->in[TEENY__BINARY_A],
                                a->in[TEENY__BINARY_B], dy, t, 0, &ys)) == TEENY_OK)
            st = teeny__st_reduce(ctx, t, 0, ys.ndim, ys.shape, ts, mask, 1.0f, g->buf, teeny__off(g));
    }
    return st;
}

/* a and b fp32 of ranks 1..5 that broadcast (NumPy) to y; op 0..4. */
teeny_status teeny__binary_infer(teeny_ctx *ctx, teeny__node_shapes *s)
{
    const teeny__shape *a = &s->in[0], *b = &s->in[1];
    char sa[96], sb[96];
    if ((int)s->attrs.binary.op < 0 || (int)s->attrs.binary.op > (int)TEENY_BINARY_POW)
        return teeny__error(ctx, TEENY_ERR_ARG, "unknown binary op %d", (int)s->attrs.binary.op);
    int ok = s->n_in == 2 && !a->is_i32 && !b->is_i32 && a->ndim >= 1 && b->ndim >= 1;
    s->out = (teeny__shape){.ndim = a->ndim > b->ndim ? a->ndim : b->ndim};
    for (int d = 0; ok && d < s->out.ndim; d++) {
        int ja = d - (s->out.ndim - a->ndim), jb = d - (s->out.ndim - b->ndim);
        int64_t x = ja < 0 ? 1 : a->shape[ja], y = jb < 0 ? 1 : b->shape[jb];
        ok = x == y || x == 1 || y == 1;
        s->out.shape[d] = x == 1 ? y : x;
    }
    if (!ok)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "a %s and b %s do not broadcast (fp32, sizes equal or 1 from the last)",
                            teeny__dims_str(a->shape, a->ndim, sa, sizeof sa),
                            teeny__dims_str(b->shape, b->ndim, sb, sizeof sb));
    s->n_param = s->n_state = s->n_saved = 0;
    return TEENY_OK;
}

/* ---- the eager API ---- */

teeny_status teeny_binary(teeny_ctx *ctx, teeny_binary_op op, const teeny_tensor *a, const teeny_tensor *b,
                          teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_binary", BINARY, binary, forward), .attrs.binary = {op}};
    const teeny__earg args[] = {{"a", a, TEENY__BINARY_A, 0},
                                {"b", b, TEENY__BINARY_B, 0},
                                {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT | TEENY__EA_INPLACE}};
    EAGER_BEGIN("teeny_binary");
    return teeny__eager_run(ctx, &e, args, 3);
}

teeny_status teeny_binary_backward(teeny_ctx *ctx, teeny_binary_op op, const teeny_tensor *a, const teeny_tensor *b,
                                   const teeny_tensor *dy, teeny_tensor *da, teeny_tensor *db)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_binary_backward", BINARY, binary, backward), .attrs.binary = {op}};
    const teeny__earg args[] = {{"a", a, TEENY__BINARY_A, 0},
                                {"b", b, TEENY__BINARY_B, 0},
                                {"dy", dy, TEENY__BINARY_DY, 0},
                                {"da", da, TEENY__BINARY_A, TEENY__EA_OUT | TEENY__EA_OPTIONAL},
                                {"db", db, TEENY__BINARY_B, TEENY__EA_OUT | TEENY__EA_OPTIONAL}};
    EAGER_BEGIN("teeny_binary_backward");
    return teeny__eager_run(ctx, &e, args, 5);
}

static teeny_status reduce_params(teeny_ctx *ctx, const char *fn, const teeny_reduce_params *p, teeny__op_attrs *at)
{
    if (!p)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: p is NULL", fn);
    at->reduce = (teeny__reduce_attrs){p->axes, p->keepdims, p->mean};
    return TEENY_OK;
}

teeny_status teeny_reduce(teeny_ctx *ctx, const teeny_reduce_params *p, const teeny_tensor *x, teeny_tensor *y)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_reduce", REDUCE, reduce, forward)};
    const teeny__earg args[] = {{"x", x, TEENY__REDUCE_X, 0}, {"y", y, TEENY__OUT_VALUE, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_reduce");
    teeny_status st = reduce_params(ctx, "teeny_reduce", p, &e.attrs);
    return st != TEENY_OK ? st : teeny__eager_run(ctx, &e, args, 2);
}

teeny_status teeny_reduce_backward(teeny_ctx *ctx, const teeny_reduce_params *p, const teeny_tensor *dy,
                                   teeny_tensor *dx)
{
    teeny__eager e = {TEENY__EAGER_OF("teeny_reduce_backward", REDUCE, reduce, backward)};
    const teeny__earg args[] = {{"dy", dy, TEENY__REDUCE_DY, 0}, {"dx", dx, TEENY__REDUCE_X, TEENY__EA_OUT}};
    EAGER_BEGIN("teeny_reduce_backward");
    teeny_status st = reduce_params(ctx, "teeny_reduce_backward", p, &e.attrs);
    return st != TEENY_OK ? st : teeny__eager_run(ctx, &e, args, 2);
}
