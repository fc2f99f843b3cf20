/*
 * conv2d_dwb.cl -- the depthwise backward in one pass, dwconv_bwd3 (DWB_*).
 * The conv2d program's fifth part, after conv2d_dw.cl.
 */
/* ---- the depthwise backward in one pass (dwconv_bwd3) ---- */

/* Output rows per item of dwconv_bwd3 (conv2d_internal.h's TEENY__DWB_ROWS: the host's count of its items),
 * and its work-group (the profile's dwb_wg, conv_dwb_wg). */
#define DWB_ROWS 4
#ifndef DWB_WG
#define DWB_WG DW_WG
#endif

/* A window of plane pc around a unit (dw_bwd3_unit): its row j < DWB_ROWS
 * + 2, plane row oh0 - 1 + j, columns iw0 .. iw0 + 5 (those inside: bits
 * of cin), into v[j*6 ..], zeros past the unit (nr rows) or the plane. */
TEENY_INLINE void dwb_window(__global const float *pc, int oh0, int iw0, int nr, int H, int W, int cin, const int V4,
                             float *v)
{
    TEENY_UNROLL
    for (int j = 0; j < DWB_ROWS + 2; j++) {
        const int ih = oh0 - 1 + j, in = j < nr + 2 && (uint)ih < (uint)H;
        dw_row6(pc + ih * W + iw0, in, cin, 1, V4, v + j * 6);
    }
}

/* The unit's dx row r (to dr, its columns inside the row: bits 1-4 of
 * cin; one float4 where V4) from dy's window v, keeping the row's own dy
 * values in g[r*4 ..]. */
TEENY_INLINE void dwb_dx_row(const float *v, const float *wv, int r, float *g, __global float *dr, int cin,
                             const int V4)
{
    float o[4];
    TEENY_UNROLL
    for (int q = 0; q < 4; q++) {
        float a = 0.0f;
        g[r * 4 + q] = v[(r + 1) * 6 + q + 1];
        TEENY_UNROLL
        for (int k = 0; k < 9; k++) { /* k = kh' * 3 + kw': dy row r + kh', column q + kw', tap 8 - k */
            const int kh = k / 3, kw = k % 3;
            a = TEENY_MAD(v[(r + kh) * 6 + q + kw], wv[8 - k], a);
        }
        o[q] = a;
    }
    if (V4) {
        *(__global float4 *)dr = (float4)(o[0], o[1], o[2], o[3]);
    } else {
        TEENY_UNROLL
        for (int q = 0; q < 4; q++)
            if (cin >> (q + 1) & 1)
                dr[q] = o[q];
    }
}

/* dwconv_bwd3's unit: rows oh0 .. oh0 + DWB_ROWS - 1 (those inside the
 * plane) by columns ow0 .. ow0 + 3 (those inside) of one H x W plane; xc,
 * dyc and dxc point at the plane of x, dy and dx, wv holds the channel's
 * 9 taps. It loads dy's window around the unit (rows oh0 - 1 .. oh0 +
 * DWB_ROWS, columns ow0 - 1 .. ow0 + 4), values outside the plane as
 * zeros, all rows before any sum, and writes
 *   dx[ih][iw] = sum over (kh, kw) of dy[ih + 1 - kh][iw + 1 - kw] w[kh][kw],
 * in the order of dwconv_fwd over dy with the taps reversed (taps kh' =
 * 2 - kh, kw' = 2 - kw ascending); then, keeping only the unit's own dy
 * values, x's window in the same registers, and adds dy[oh][ow]
 * x[oh - 1 + kh][ow - 1 + kw] into dwacc[kh * 3 + kw] over its positions
 * (row, column, then tap order). One window at a time took the kernel
 * from 128 registers to 79 (ptxas for sm_90) and the H200's 3x3
 * 256-channel backward at 56^2 from 0.132 to 0.113 ms (2026-12-03), though
 * an item now waits on two rounds of loads. Every product is taken, the
 * window's zeros included (zero padding, as PyTorch's; a test per product
 * made the kernel 1.8x slower on the H200): with finite inputs a zero
 * adds nothing, so dx has the bits of the input gradient it replaces
 * (which skips them) but for the sign of a zero; an infinite tap or dy
 * next to the border gives NaN there, as zero padding does. V4: x, dy and
 * dx rows are whole float4s (W % 4 == 0, offsets too), so a window row's
 * middle four load as one float4 and dx goes out as float4s. */
TEENY_INLINE void dw_bwd3_unit(__global const float *xc, __global const float *dyc, __global float *dxc,
                               const float *wv, int H, int W, int oh0, int ow0, const int V4, float *dwacc)
{
    const int nr = min(DWB_ROWS, H - oh0), iw0 = ow0 - 1;
    int cin = 0; /* bit p: column iw0 + p inside the row */
    TEENY_UNROLL
    for (int p = 0; p < 6; p++)
        cin |= ((uint)(iw0 + p) < (uint)W) << p;
    if (V4)
        cin |= 0x1e; /* what the caller checked, for the compiler */
    float v[(DWB_ROWS + 2) * 6], g[DWB_ROWS * 4];
    dwb_window(dyc, oh0, iw0, nr, H, W, cin, V4, v);
    TEENY_UNROLL
    for (int r = 0; r < DWB_ROWS; r++)
        if (r < nr)
            dwb_dx_row(v, wv, r, g, dxc + (oh0 + r) * W + ow0, cin, V4);
    dwb_window(xc, oh0, iw0, nr, H, W, cin, V4, v); /* x's window in the same registers */
    TEENY_UNROLL
    for (int r = 0; r < DWB_ROWS; r++) {
        if (r >= nr)
            continue;
        TEENY_UNROLL
        for (int q = 0; q < 4; q++)
            TEENY_UNROLL
            for (int k = 0; k < 9; k++) { /* tap k = kh * 3 + kw: x row r + kh, column q + kw */
                const int kh = k / 3, kw = k % 3;
                dwacc[k] = TEENY_MAD(g[r * 4 + q], v[(r + kh) * 6 + q + kw], dwacc[k]);
            }
    }
}

/* Input and weight gradients of a 3x3 depthwise convolution at stride 1,
 * dilation 1, padding 1 and multiplier 1 (OH = H, OW = W) in one pass:
 * each of x and dy is read once, where dwconv_fwd (dx) and dwconv_dw read
 * dy twice and x once in two launches. Grid (DW_WG * Z, C), work-group
 * (DW_WG): channel c's units (b, strip of DWB_ROWS rows, 4 columns),
 * numbered column-fastest so that a work-group's lanes run along rows,
 * DW_WG to a group: group (z, c) takes units z * DW_WG .. + DW_WG - 1
 * (dw_bwd3_unit: dx of the unit, and its positions' weight-gradient sums),
 * then sums the 9 taps over its items (teeny_group_sum_rows) into
 * out[out_off + z * out_zstride + c * 9 + tap]; conv_reduce_parts sums
 * the Z partials in order where Z > 1 (conv2d_grad.c). */
__kernel __attribute__((reqd_work_group_size(DWB_WG, 1, 1)))
void dwconv_bwd3(__global const float *restrict x, int x_off, __global const float *restrict dy, int dy_off,
                 __global const float *restrict w, int w_off, __global float *restrict dx, int dx_off,
                 __global float *restrict out, int out_off, int out_zstride, int B, int C, int H, int W)
{
    __local float red[9 * DWB_WG];
    const int lid = get_local_id(0), z = get_group_id(0), c = get_group_id(1);
    const int OWc = (W + 3) / 4, per_b = (H + DWB_ROWS - 1) / DWB_ROWS * OWc, u = z * DWB_WG + lid;
    float dwacc[9];
    TEENY_UNROLL
    for (int t = 0; t < 9; t++)
        dwacc[t] = 0.0f;
    if (u < B * per_b) {
        const int b = u / per_b, rest = u - b * per_b, strip = rest / OWc, cg = rest - strip * OWc;
        const int plane = (b * C + c) * H * W;
        float wv[9];
        TEENY_UNROLL
        for (int t = 0; t < 9; t++)
            wv[t] = w[w_off + c * 9 + t];
        if ((W & 3) == 0 && ((x_off | dy_off | dx_off) & 3) == 0)
            dw_bwd3_unit(x + x_off + plane, dy + dy_off + plane, dx + dx_off + plane, wv, H, W, strip * DWB_ROWS,
                         cg * 4, 1, dwacc);
        else
            dw_bwd3_unit(x + x_off + plane, dy + dy_off + plane, dx + dx_off + plane, wv, H, W, strip * DWB_ROWS,
                         cg * 4, 0, dwacc);
    }
    TEENY_UNROLL
    for (int t = 0; t < 9; t++)
        red[t * DWB_WG + lid] = dwacc[t];
    teeny_group_sum_rows(red, lid, DWB_WG, 9);
    if (lid < 9)
        out[out_off + z * out_zstride + c * 9 + lid] = red[lid * DWB_WG];
}
