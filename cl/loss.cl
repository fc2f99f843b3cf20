/*
 * loss.cl -- softmax cross-entropy over logits [N, K] (row-major) with
 * int32 labels [N], its gradient, and per-row argmax.
 *
 * A row's loss is w * (lse(row) - row[label]), lse the max-subtracted
 * log-sum-exp, w its class weight (ce_weight: 1 without weights, 0 for an
 * ignored row); the loss is their weighted mean, their sum or each row's. Every sum has a fixed order (work-group tree
 * over a fixed strided split, then one work-group over the per-row
 * losses), so results are bit-identical run to run. A label outside
 * [0, K) is never used as an index; it turns its row's loss (and so the
 * mean) and its row's gradient into NaN.
 *
 * Segments. Where a device limits the loop trips of a work-item (Mesa's
 * llvmpipe; src/program/probe.c) the host runs ce_mean's loop over the
 * rows and ce_argmax_rows' loop over a row in launches over segments,
 * carrying each item's running sum (best value, its index) in workspace
 * and in the output: the same visits in the same order, the bits of one
 * launch. seg: CE_SEG_FIRST starts, CE_SEG_LAST ends the loop.
 *
 * Tunable: CE_WG, the work-group size of the reductions (a power of two).
 */
#ifndef CE_WG
#define CE_WG 256
#endif
#define CE_SEG_FIRST 1
#define CE_SEG_LAST 2

/* Work-group tree reductions of red[0..CE_WG); every item gets the result. */
TEENY_INLINE float ce_group_max(__local float *red, int lid, float v)
{
    red[lid] = v;
    for (int span = CE_WG / 2; span > 0; span >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < span)
            red[lid] = fmax(red[lid], red[lid + span]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* red may be reused right after */
    return r;
}

TEENY_INLINE float ce_group_sum(__local float *red, int lid, float v)
{
    red[lid] = v;
    for (int span = CE_WG / 2; span > 0; span >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < span)
            red[lid] += red[lid + span];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* Class weights and ignore_index (teeny_ce_params): the weight of a row
 * whose label is lab: 0 when ignored (has_ii and lab == ii), w[lab] (1
 * without weights) for a label in [0, K), NaN for any other label. */
#define CE_MEAN 0 /* teeny_reduction */
#define CE_SUM 1
#define CE_NONE 2
#define CE_WSUM 3 /* ce_mean: the sum of the weights alone (the backward's MEAN) */
TEENY_INLINE float ce_weight(int lab, int K, __global const float *weights, int w_off, int has_w, int has_ii, int ii)
{
    if (has_ii && lab == ii)
        return 0.0f;
    if (lab < 0 || lab >= K)
        return NAN;
    return has_w ? weights[w_off + lab] : 1.0f;
}

/* Scores of rank > 2, [N, K, D] (D the product of the dimensions past the
 * classes): row r = n * D + d holds the K values at n*K*D + d + k*D, with
 * label r (labels [N, D]). D = 1 is [N, K].
 *
 * Grid (CE_WG * N * D), work-group CE_WG: group n owns row n. Items stride
 * over the row for its max, then for sum exp(v - max); they write the row's
 * probabilities and item 0 the row's loss, w * (lse - row[label]), into
 * row_loss[n] (0 for an ignored row). */
__kernel __attribute__((reqd_work_group_size(CE_WG, 1, 1)))
void ce_forward_rows(__global const float *logits, int l_off, __global const int *labels, int lab_off, int K, int D,
                     __global const float *weights, int w_off, int has_w, int has_ii, int ii,
                     __global float *probs, int p_off, __global float *row_loss, int rl_off)
{
    __local float red[CE_WG];
    int lid = get_local_id(0), n = get_group_id(0);
    int base = (n / D) * K * D + n % D; /* row n's first value; then stride D */
    __global const float *row = logits + l_off + base;
    float m = -INFINITY, s = 0.0f;
    for (int k = lid; k < K; k += CE_WG)
        m = fmax(m, row[k * D]);
    m = ce_group_max(red, lid, m);
    for (int k = lid; k < K; k += CE_WG)
        s += exp(row[k * D] - m);
    s = ce_group_sum(red, lid, s);
    float inv_s = 1.0f / s;
    /* Every item takes the log, outside the branch below: log() reads a
     * constant table that Mesa's rusticl passes as a hidden kernel argument,
     * and llvmpipe warns on stderr when a kernel argument is loaded under
     * work-item-dependent control flow. */
    const float log_s = log(s);
    for (int k = lid; k < K; k += CE_WG)
        probs[p_off + base + k * D] = exp(row[k * D] - m) * inv_s;
    if (lid == 0) {
        int label = labels[lab_off + n];
        float w = ce_weight(label, K, weights, w_off, has_w, has_ii, ii);
        /* lse - row[label] = log(s) - (row[label] - m), without forming lse */
        row_loss[rl_off + n] = w == 0.0f ? 0.0f : label >= 0 && label < K ? w * (log_s - (row[label * D] - m)) : NAN;
    }
}

/* Grid CE_WG, one work-group: loss[0] = the reduction (mode: CE_MEAN,
 * CE_SUM or CE_WSUM) of row_loss[0..N), each item summing a fixed strided
 * subset of the rows' losses and of their weights (ce_weight) before the
 * trees. This launch visits rows [i_begin, i_end) (i_begin a multiple of
 * CE_WG); an item's sums start from carry[lid], carry[CE_WG + lid] unless
 * seg starts the loop, and go back there unless it ends it. CE_WSUM reads
 * no row_loss. */
__kernel __attribute__((reqd_work_group_size(CE_WG, 1, 1)))
void ce_mean(__global const float *row_loss, int rl_off, __global const int *labels, int lab_off, int K,
             __global const float *weights, int w_off, int has_w, int has_ii, int ii, int mode, int N,
             __global float *loss, int loss_off, int i_begin, int i_end, int seg, __global float *carry)
{
    __local float red[CE_WG];
    int lid = get_local_id(0);
    float s = seg & CE_SEG_FIRST ? 0.0f : carry[lid], sw = seg & CE_SEG_FIRST ? 0.0f : carry[CE_WG + lid];
    for (int i = i_begin + lid; i < i_end; i += CE_WG) {
        if (mode != CE_WSUM)
            s += row_loss[rl_off + i];
        if (mode != CE_SUM) {
            /* a label out of range adds nothing: the loss is NaN anyway,
             * and the backward's other rows stay finite */
            int lab = labels[lab_off + i];
            sw += lab >= 0 && lab < K ? ce_weight(lab, K, weights, w_off, has_w, has_ii, ii) : 0.0f;
        }
    }
    if (!(seg & CE_SEG_LAST)) {
        carry[lid] = s;
        carry[CE_WG + lid] = sw;
        return;
    }
    s = ce_group_sum(red, lid, s);
    sw = ce_group_sum(red, lid, sw);
    if (lid == 0)
        loss[loss_off] = mode == CE_SUM ? s : mode == CE_WSUM ? sw : s / sw;
}

/* Grid (N * K * D): item i = (n*K + k)*D + d writes, for row r = n*D + d,
 * dlogits = (probs - [k == label]) * (dloss[n * dl_step] * w / denom[0]),
 * w the row's weight (ce_weight; an ignored row writes 0), denom[0] the sum
 * of the weights (MEAN with weights or ignore_index) when has_denom, else
 * den (N for the plain MEAN, 1 for SUM and NONE). */
__kernel void ce_backward(__global const float *probs, int p_off, __global const int *labels, int lab_off,
                          __global const float *weights, int w_off, int has_w, int has_ii, int ii,
                          __global const float *dloss, int dl_off, int dl_step, __global const float *denom,
                          int den_off, int has_denom, float den, int N, int K, int D, __global float *dlogits,
                          int d_off)
{
    int i = get_global_id(0);
    if (i >= N * K) /* N: the rows (N * D of [N, K, D]) */
        return;
    int nb = i / (K * D), rem = i - nb * K * D, k = rem / D, n = nb * D + (rem - k * D), label = labels[lab_off + n];
    float w = ce_weight(label, K, weights, w_off, has_w, has_ii, ii);
    float g = dloss[dl_off + n * dl_step] * w / (has_denom ? denom[den_off] : den);
    float v = probs[p_off + i] - (k == label ? 1.0f : 0.0f);
    dlogits[d_off + i] = w == 0.0f ? 0.0f : label >= 0 && label < K ? v * g : NAN;
}

/* Grid (N): item n scans row n of x [N, K]; the first maximum wins, a NaN
 * beats every number. This launch scans columns [k_begin, k_end), starting
 * from best[n] and out[n] unless seg starts the row, and leaves the best
 * value in best[n] unless it ends it. */
__kernel void ce_argmax_rows(__global const float *x, int x_off, int N, int K, __global int *out, int out_off,
                             int k_begin, int k_end, int seg, __global float *best_carry)
{
    int n = get_global_id(0);
    if (n >= N)
        return;
    __global const float *row = x + x_off + n * K;
    float best = seg & CE_SEG_FIRST ? row[0] : best_carry[n];
    int arg = seg & CE_SEG_FIRST ? 0 : out[out_off + n];
    for (int k = max(k_begin, 1); k < k_end && !isnan(best); k++) {
        float v = row[k];
        if (v > best || isnan(v)) {
            best = v;
            arg = k;
        }
    }
    out[out_off + n] = arg;
    if (!(seg & CE_SEG_LAST))
        best_carry[n] = best;
}
