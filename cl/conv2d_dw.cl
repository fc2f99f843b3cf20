/*
 * conv2d_dw.cl -- the depthwise kernels (one input channel a group):
 * dwconv_fwd, dwconv_dx and dwconv_dw (DW_*). The conv2d program's
 * fourth part, after conv2d_gemm_cpu.cl.
 */
/* ---- depthwise (one input channel per group) ---- */

/* The depthwise kernels' geometry, one int16 argument (the host packs it
 * in the same order: conv2d_internal.h dw_geometry): batch, input channels
 * and plane, the channel multiplier (Cout / Cin), the output plane, the
 * kernel, and per axis (h, w) stride, padding and dilation; slot 15 holds
 * the groups (= Cin). DW_GEOMETRY(g) names them as the kernels' locals. */
#define DW_GEOMETRY(g)                                                                                      \
    const int B = (g).s0, Cin = (g).s1, H = (g).s2, W = (g).s3, mult = (g).s4, OH = (g).s5, OW = (g).s6, \
              KH = (g).s7, KW = (g).s8, s_h = (g).s9, s_w = (g).sa, p_h = (g).sb, p_w = (g).sc, d_h = (g).sd, \
              d_w = (g).se

/* Values iw0 + p * dc (p < 6) of one input row, from r = row + iw0: value
 * p where the row is inside the plane (in) and so is column p (bit p of
 * cin), else 0. V4 (a constant; dc 1): values 1-4 as one float4, the
 * caller having checked that they lie inside the row and 16-byte aligned.
 * dw_fwd_rows3 and dw_bwd3_unit load their windows with it. */
TEENY_INLINE void dw_row6(__global const float *r, int in, int cin, int dc, const int V4, float *v)
{
    if (V4) {
        const float4 q = in ? *(__global const float4 *)(r + 1) : (float4)(0.0f);
        v[0] = in && cin & 1 ? r[0] : 0.0f;
        v[1] = q.x;
        v[2] = q.y;
        v[3] = q.z;
        v[4] = q.w;
        v[5] = in && cin & 32 ? r[5] : 0.0f;
    } else {
        TEENY_UNROLL
        for (int p = 0; p < 6; p++)
            v[p] = in && cin >> p & 1 ? r[p * dc] : 0.0f;
    }
}

/* dw_fwd_rows3's sums of input row j (a constant where it is inlined):
 * its values v[0 .. NC + 1] into every output row r < nr of the strip
 * that reads it (tap kh = j - r * SH), columns q < NC, taps kw in order,
 * those whose input column lies outside the row (bit q + kw of cin)
 * skipped. */
TEENY_INLINE void dw_fwd_row_sums(const float *v, const float *wv, const int j, const int SH, int nr, const int NC,
                                  int cin, float *acc)
{
    TEENY_UNROLL
    for (int r = 0; r < DW_ROWS; r++) {
        const int kh = j - r * SH;
        if (kh < 0 || kh > 2 || r >= nr)
            continue;
        TEENY_UNROLL
        for (int q = 0; q < 4; q++) {
            TEENY_UNROLL
            for (int kw = 0; kw < 3; kw++)
                if (q < NC && cin >> (q + kw) & 1)
                    acc[q * DW_ROWS + r] = TEENY_MAD(v[q + kw], wv[kh * 3 + kw], acc[q * DW_ROWS + r]);
        }
    }
}

/* dwconv_fwd's path for 3x3 kernels with dilation 1 down the rows and
 * row stride SH (1 or 2: a constant where it is inlined, so the unrolled
 * loops resolve every tap test at compile time). The item walks its
 * strip's input rows once, (nr - 1) * SH + 3 of them, loads each row's
 * values once and adds them into every output row r that reads that row
 * (input row j is tap kh = j - r * SH of row r): 3 loads per input row
 * instead of 3 per tap and output row; at row stride 1 it loads all
 * DW_ROWS + 2 rows before the first sum, so that every load of the strip
 * is in flight at once. Per output the taps arrive in the general path's
 * order (kh, then kw), so both paths give the same bits.
 * NC (a constant, 1, 2 or 4): output columns per item, column q's sums
 * in acc[q * DW_ROWS + r]; with 2 or 4 (column stride and dilation 1, the
 * plan's rule) the NC + 2 input values of a row serve the NC columns'
 * taps (4 loads for 2 outputs, 6 for 4, instead of 3 per output), the
 * taps again in (kh, kw) order: the same bits as one column per item.
 * V4 (a constant): with NC 4, the row's values 1-4 as one float4, the
 * caller having checked that they lie inside the row and 16-byte aligned
 * (dwconv_fwd: 3 loads per input row for 4 outputs). */
TEENY_INLINE void dw_fwd_rows3(__global const float *xc, __global const float *wc, int wstep, int ih0, int iw0,
                               int H, int W, int d_w, int nr, const int SH, const int NC, const int V4, float *acc)
{
    float wv[9];
    TEENY_UNROLL
    for (int t = 0; t < 9; t++)
        wv[t] = wc[t * wstep];
    const int dc = NC == 1 ? d_w : 1;
    int cin = 0; /* bit p: input column iw0 + p * dc inside the row (p < NC + 2; a mask, not an array, which
                  * a compiler might place in memory) */
    TEENY_UNROLL
    for (int p = 0; p < 6; p++)
        cin |= (p < NC + 2 && (uint)(iw0 + p * dc) < (uint)W) << p;
    if (NC == 4 && V4)
        cin |= 0x1e; /* what the caller checked, for the compiler: the taps of columns 1-4 need no test */
    const int n_in = (nr - 1) * SH + 3;
    if (SH == 1) {
        /* every input row's values first, then the sums: the loads carry no branch between them, so all of
         * them can be in flight at once (a row's loads under its own branch waited on the previous row's
         * sums: one memory round trip per input row) */
        float v[(DW_ROWS + 2) * 6];
        int rin = 0; /* bit j: input row ih0 + j is one of the strip's and inside the plane */
        TEENY_UNROLL
        for (int j = 0; j < DW_ROWS + 2; j++) {
            const int ih = ih0 + j, in = j < n_in && (uint)ih < (uint)H;
            rin |= in << j;
            dw_row6(xc + ih * W + iw0, in, cin, dc, NC == 4 && V4, v + j * 6);
        }
        TEENY_UNROLL
        for (int j = 0; j < DW_ROWS + 2; j++)
            if (rin >> j & 1)
                dw_fwd_row_sums(v + j * 6, wv, j, 1, nr, NC, cin, acc);
        return;
    }
    TEENY_UNROLL
    for (int j = 0; j < (DW_ROWS - 1) * SH + 3; j++) {
        const int ih = ih0 + j;
        if (j >= n_in || (uint)ih >= (uint)H)
            continue;
        float v[6];
        dw_row6(xc + ih * W + iw0, 1, cin, dc, NC == 4 && V4, v);
        dw_fwd_row_sums(v, wv, j, SH, nr, NC, cin, acc);
    }
}

/* Grid (items rounded up to DW_WG), work-group (DW_WG); no local memory
 * and no barrier. The output planes (b, co) are cut into strips of one
 * column by up to `rows` (<= DW_ROWS) rows: row_blocks strips down each
 * column, items numbered column-fastest through a plane, then
 * row-blocks, then planes, so a work-group's lanes run along rows
 * (coalesced loads and stores) and fill whole planes, several planes per
 * group when planes are small (no idle lanes at W = 56, 28, 14, 7). Item
 * i decodes its strip once (three divisions) and accumulates one
 * register per row and column. cols (1, 2 or 4,
 * teeny__conv_dw_plan_fwd): output columns per item, 2 or 4 only on
 * dw_fwd_rows3's unit column stride and dilation, 4 only at row stride 1
 * (items then number runs of cols columns; where OW is no multiple of
 * cols the last item stores the 1 to cols - 1 columns left; a run goes
 * out as one float2 or float4 where y's rows and offset are multiples of
 * cols; with 4, each input row's middle four values come as one float4
 * where x's rows and offset allow it, v4). 3x3 kernels with row stride 1 or 2 and row dilation
 * 1 take dw_fwd_rows3 (each input value loaded once); any other kernel
 * loads, per tap (kh, kw), the DW_ROWS inputs under its strip's rows --
 * independent loads in flight, the strip's rows sharing each input row
 * through the cache. flip != 0 reads each channel's taps in reverse
 * order (the kernel rotated by 180 degrees): the input gradient of a
 * stride-1 depthwise convolution with multiplier 1 is this forward pass
 * over dy (conv2d_exec.c). */
__kernel __attribute__((reqd_work_group_size(DW_WG, 1, 1)))
void dwconv_fwd(__global const float *restrict x, int x_off, __global const float *restrict w, int w_off,
                __global float *restrict y, int y_off, int16 geo, int rows, int row_blocks,
                __global const float *bias, int bias_off, __global const float *scale, int scale_off,
                __global const float *shift, int shift_off, int epi, int act, int flip, int cols)
{
    DW_GEOMETRY(geo);
    const int Cout = Cin * mult, KHW = KH * KW, OWc = (OW + cols - 1) / cols, per_plane = row_blocks * OWc;
    if (get_global_id(0) >= (size_t)B * Cout * per_plane) /* the grid is rounded up past int range at most */
        return;
    const int i = get_global_id(0), plane = i / per_plane;
    const int in_plane = i - plane * per_plane, rb = in_plane / OWc, ow = (in_plane - rb * OWc) * cols;
    const int b = plane / Cout, co = plane - b * Cout, oh0 = rb * rows, nr = min(rows, OH - oh0);
    __global const float *xc = x + x_off + (b * Cin + co / mult) * H * W;
    __global const float *wc = w + w_off + co * KHW + (flip ? KHW - 1 : 0);
    const int wstep = flip ? -1 : 1, ih0 = oh0 * s_h - p_h, iw0 = ow * s_w - p_w, sW = s_h * W;
    float acc[4 * DW_ROWS];
    TEENY_UNROLL
    for (int r = 0; r < 4 * DW_ROWS; r++)
        acc[r] = 0.0f;
    /* cols 4: values 1-4 of each input row as one float4 where the rows start 16-byte aligned and they lie
     * inside the row */
    const int v4 = cols == 4 && ((x_off + iw0 + 1) & 3) == 0 && (W & 3) == 0 && (uint)(iw0 + 1) < (uint)W &&
                   (uint)(iw0 + 4) < (uint)W;
    if (KH == 3 && KW == 3 && d_h == 1 && s_h == 1) {
        if (v4)
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 1, 4, 1, acc);
        else if (cols == 4)
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 1, 4, 0, acc);
        else if (cols == 2)
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 1, 2, 0, acc);
        else
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 1, 1, 0, acc);
    } else if (KH == 3 && KW == 3 && d_h == 1 && s_h == 2) {
        if (cols == 2)
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 2, 2, 0, acc);
        else
            dw_fwd_rows3(xc, wc, wstep, ih0, iw0, H, W, d_w, nr, 2, 1, 0, acc);
    } else {
        for (int kh = 0; kh < KH; kh++) {
            const int ihk = ih0 + kh * d_h;
            __global const float *xr = xc + ihk * W + iw0;
            for (int kw = 0; kw < KW; kw++, wc += wstep) {
                const float wv = *wc;
                if ((uint)(iw0 + kw * d_w) >= (uint)W)
                    continue;
                TEENY_UNROLL
                for (int r = 0; r < DW_ROWS; r++)
                    if (r < nr && (uint)(ihk + r * s_h) < (uint)H)
                        acc[r] = TEENY_MAD(xr[r * sW + kw * d_w], wv, acc[r]);
            }
        }
    }
    const float2 e = conv_epilogue(epi, co, bias, bias_off, scale, scale_off, shift, shift_off);
    __global float *yc = y + y_off + (plane * OH + oh0) * OW + ow;
    /* nc columns to store: a float4 (cols 4) or float2 (cols 2) where y's rows and offset allow it */
    const int nc = min(cols, OW - ow), vec = nc == cols && cols > 1 && ((y_off | OW) & (cols - 1)) == 0;
    TEENY_UNROLL
    for (int r = 0; r < DW_ROWS; r++) {
        if (r >= nr)
            continue;
        float o[4];
        TEENY_UNROLL
        for (int q = 0; q < 4; q++)
            o[q] = q < nc ? conv_act(act, acc[q * DW_ROWS + r] * e.x + e.y) : 0.0f;
        __global float *yr = yc + r * OW;
        if (vec && cols == 4) {
            *(__global float4 *)yr = (float4)(o[0], o[1], o[2], o[3]);
        } else if (vec) {
            *(__global float2 *)yr = (float2)(o[0], o[1]);
        } else {
            TEENY_UNROLL
            for (int q = 0; q < 4; q++)
                if (q < nc)
                    yr[q] = o[q];
        }
    }
}

TEENY_INLINE int floor_div(int a, int b)
{
    int q = a / b;
    return q * b > a ? q - 1 : q;
}

/* Input gradient of the depthwise case. Grid (DW_WG * tiles_h * tiles_w,
 * Cin, B), work-group (DW_WG); group (tile, ci, b) computes the TH x TW
 * tile of dx[b, ci] at (tile / tiles_w * TH, tile % tiles_w * TW), summing
 * over the mult output channels of ci. The dy patches the tile touches
 * (at most PH x PW per channel, from row floor((ih0 + p_h - (KH-1)*d_h)/s_h))
 * and the taps of all mult channels are staged in local memory at once
 * (patch: [mult][PH*PW], then [mult][KH*KW]), so the kernel has one
 * barrier and no barrier inside a loop: PoCL 5.0 loses the staged taps
 * when a barrier loop carries per-item state. Item t owns column t % TW
 * of rows t / TW + i * (DW_WG / TW), i < DW_ROWS (TH allows no more). */
__kernel __attribute__((reqd_work_group_size(DW_WG, 1, 1)))
void dwconv_dx(__global const float *restrict dy, int dy_off, __global const float *restrict w, int w_off,
               __global float *restrict dx, int dx_off, int16 geo, int TH, int TW, int tiles_w, int PH, int PW,
               __local float *patch)
{
    DW_GEOMETRY(geo);
    const int lid = get_local_id(0), tile = get_group_id(0), ci = get_group_id(1), b = get_group_id(2);
    const int ih0 = tile / tiles_w * TH, iw0 = (tile % tiles_w) * TW, KHW = KH * KW, Cout = Cin * mult;
    const int oh_lo = floor_div(ih0 + p_h - (KH - 1) * d_h, s_h), ow_lo = floor_div(iw0 + p_w - (KW - 1) * d_w, s_w);
    const int ph = min(PH, floor_div(ih0 + TH - 1 + p_h, s_h) - oh_lo + 1);
    const int pw = min(PW, floor_div(iw0 + TW - 1 + p_w, s_w) - ow_lo + 1);
    const int PP = PH * PW, n_patch = mult * ph * pw;
    __local float *wl = patch + mult * PP;
    __global const float *dyb = dy + dy_off + (b * Cout + ci * mult) * OH * OW;
    __global const float *wc = w + w_off + ci * mult * KHW; /* the mult channels' taps are contiguous */

    for (int e = lid; e < n_patch + mult * KHW; e += DW_WG) {
        if (e < n_patch) {
            int j = e / (ph * pw), rc = e - j * (ph * pw), r = rc / pw, c = rc - r * pw;
            int oh = oh_lo + r, ow = ow_lo + c;
            patch[j * PP + r * PW + c] =
                (uint)oh < (uint)OH && (uint)ow < (uint)OW ? dyb[j * OH * OW + oh * OW + ow] : 0.0f;
        } else {
            wl[e - n_patch] = wc[e - n_patch];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const int rstep = DW_WG / TW, col = lid % TW, row0 = lid / TW, iw = iw0 + col;
    if (row0 >= rstep || iw >= W)
        return;
    for (int i = 0; i < DW_ROWS; i++) {
        int row = row0 + i * rstep, ih = ih0 + row;
        if (row >= TH || ih >= H)
            break;
        float a = 0.0f;
        for (int j = 0; j < mult; j++) {
            __local const float *pj = patch + j * PP, *wj = wl + j * KHW;
            for (int kh = 0; kh < KH; kh++) {
                int th = ih + p_h - kh * d_h - oh_lo * s_h; /* >= 0 by the choice of oh_lo */
                int lr = th / s_h;
                if (th % s_h || lr >= ph)
                    continue;
                for (int kw = 0; kw < KW; kw++) {
                    int tw = iw + p_w - kw * d_w - ow_lo * s_w;
                    int lc = tw / s_w;
                    if (tw % s_w == 0 && lc < pw)
                        a = TEENY_MAD(pj[lr * PW + lc], wj[kh * KW + kw], a);
                }
            }
        }
        dx[dx_off + ((b * Cin + ci) * H + ih) * W + iw] = a;
    }
}

/* dwconv_dw's path for 3x3 kernels at stride 1 and dilation 1 (the host
 * sets `rows3` to NC, 1 or 4). The chunk's positions [r_begin, r_end) lie
 * in output rows row_b .. row_l of the B*OH rows; these are cut into
 * strips of DW_ROWS rows, and item lid takes units u = lid, + DW_WG, ...
 * of (strip u / OWc, columns NC * (u % OWc) .. + NC - 1), so a
 * work-group's lanes run along rows (coalesced loads). Walking its
 * columns down the strip, the item keeps the 3 x (NC + 2) inputs under
 * the current positions in registers: moving one row down in the same
 * plane loads one new input row (NC + 2 values, the middle four as a
 * float4 where AX says x's rows allow it) and NC dy values (a float4
 * where AD says so), where the per-position walk loads 10 values a
 * position; the first position and a new plane load all 3 rows (the
 * chunk skips positions only before its first and after its last, so
 * the positions a unit takes in one plane are consecutive rows).
 * Positions outside the chunk or the plane and inputs outside the plane
 * are skipped, not added as zeros. acc[tap] gets tap kh * 3 + kw, in the
 * order of the positions (row, then column). */
TEENY_INLINE void dw_dw_rows3(__global const float *xc0, __global const float *dyc0, int Cin, int Cout, int H,
                              int W, int OH, int OW, int p_h, int p_w, int r_begin, int r_end, int lid, const int NC,
                              int AX, int AD, float *acc)
{
    const int HW = H * W, OHW = OH * OW, row_b = r_begin / OW, row_l = (r_end - 1) / OW, OWc = (OW + NC - 1) / NC;
    const int n_units = (row_l - row_b + DW_ROWS) / DW_ROWS * OWc;
    for (int u = lid; u < n_units; u += DW_WG) {
        const int strip = u / OWc, ow = (u - strip * OWc) * NC, iw0 = ow - p_w;
        /* bit m: input column iw0 + m inside the row (m < NC + 2); bit 8 + q: output column ow + q inside */
        int cin = 0;
        TEENY_UNROLL
        for (int m = 0; m < 6; m++)
            cin |= (m < NC + 2 && (uint)(iw0 + m) < (uint)W) << m;
        TEENY_UNROLL
        for (int q = 0; q < 4; q++)
            cin |= (q < NC && ow + q < OW) << (8 + q);
        const int vx = NC == 4 && AX && (cin & 0x1e) == 0x1e, vd = NC == 4 && AD && (cin & 0xf00) == 0xf00;
        int row = row_b + strip * DW_ROWS, b = row / OH, oh = row - b * OH, last_b = -1;
        float xw[18]; /* [3][6]: the window's input rows */
        int rv[3];
        TEENY_UNROLL
        for (int k = 0; k < DW_ROWS; k++, row++) {
            const int pos = row * OW + ow;
            if (row <= row_l && pos + NC > r_begin && pos < r_end) {
                __global const float *xb = xc0 + b * Cin * HW + iw0;
                __global const float *gb = dyc0 + b * Cout * OHW + oh * OW + ow;
                int gin = 0; /* bit q: position pos + q is the chunk's and the plane's */
                TEENY_UNROLL
                for (int q = 0; q < 4; q++)
                    gin |= (cin >> (8 + q) & 1 && pos + q >= r_begin && pos + q < r_end) << q;
                float g[4];
                if (vd) {
                    const float4 t = *(__global const float4 *)gb;
                    g[0] = t.x;
                    g[1] = t.y;
                    g[2] = t.z;
                    g[3] = t.w;
                } else {
                    TEENY_UNROLL
                    for (int q = 0; q < 4; q++)
                        g[q] = gin >> q & 1 ? gb[q] : 0.0f;
                }
                const int first = b != last_b; /* a fresh window: all 3 rows, else one row down */
                TEENY_UNROLL
                for (int kh = 0; kh < 3; kh++) {
                    if (kh < 2 && !first) {
                        TEENY_UNROLL
                        for (int m = 0; m < 6; m++)
                            xw[kh * 6 + m] = xw[kh * 6 + 6 + m];
                        rv[kh] = rv[kh + 1];
                        continue;
                    }
                    const int ih = oh - p_h + kh;
                    rv[kh] = (uint)ih < (uint)H;
                    __global const float *xr = xb + ih * W;
                    if (rv[kh] && vx) {
                        const float4 t = *(__global const float4 *)(xr + 1);
                        xw[kh * 6] = cin & 1 ? xr[0] : 0.0f;
                        xw[kh * 6 + 1] = t.x;
                        xw[kh * 6 + 2] = t.y;
                        xw[kh * 6 + 3] = t.z;
                        xw[kh * 6 + 4] = t.w;
                        xw[kh * 6 + 5] = cin & 32 ? xr[5] : 0.0f;
                    } else {
                        TEENY_UNROLL
                        for (int m = 0; m < 6; m++)
                            xw[kh * 6 + m] = rv[kh] && cin >> m & 1 ? xr[m] : 0.0f;
                    }
                }
                TEENY_UNROLL
                for (int q = 0; q < 4; q++)
                    TEENY_UNROLL
                    for (int kh = 0; kh < 3; kh++)
                        TEENY_UNROLL
                        for (int kw = 0; kw < 3; kw++)
                            if (q < NC && gin >> q & 1 && rv[kh] && cin >> (q + kw) & 1)
                                acc[kh * 3 + kw] = TEENY_MAD(g[q], xw[kh * 6 + q + kw], acc[kh * 3 + kw]);
                last_b = b;
            }
            if (++oh == OH) {
                oh = 0;
                b++;
            }
        }
    }
}

/* Weight gradient of the depthwise case. Grid (DW_WG * Z, Cout),
 * work-group (DW_WG): group (z, co) sums dy[b, co, oh, ow] *
 * x[b, co / mult, oh*s_h - p_h + kh*d_h, ow*s_w - p_w + kw*d_w] over
 * r = (b, oh, ow) in [z*r_chunk, +r_chunk), item t taking r = t, t + DW_WG,
 * ..., DW_TAPS taps per pass -- or, where rows3 != 0 (3x3, stride 1,
 * dilation 1, DW_TAPS >= 9: one pass), column strips (dw_dw_rows3); the
 * work-group tree sum of each tap goes to
 * out[out_off + z*out_zstride + co*KH*KW + tap]. */
__kernel __attribute__((reqd_work_group_size(DW_WG, 1, 1)))
void dwconv_dw(__global const float *restrict x, int x_off, __global const float *restrict dy, int dy_off,
               __global float *restrict out, int out_off, int out_zstride, int16 geo, int R, int r_chunk, int rows3)
{
    DW_GEOMETRY(geo);
    __local float red[DW_TAPS * DW_WG];
    const int lid = get_local_id(0), z = get_group_id(0), co = get_group_id(1);
    const int ci = co / mult, KHW = KH * KW, Cout = Cin * mult, HW = H * W, OHW = OH * OW;
    const int r_begin = z * r_chunk, r_end = min(R, r_begin + r_chunk);
    const conv_idx step = idx_make(DW_WG, OH, OW);
    __global float *o = out + out_off + z * out_zstride + co * KHW;

    for (int t0 = 0; t0 < KHW; t0 += DW_TAPS) {
        float acc[DW_TAPS];
        for (int t = 0; t < DW_TAPS; t++)
            acc[t] = 0.0f;
        const int kh0 = t0 / KW, kw0 = t0 - kh0 * KW;
        conv_idx at = idx_make(r_begin + lid, OH, OW);
#if DW_TAPS >= 9
        if (rows3 == 4)
            dw_dw_rows3(x + x_off + ci * HW, dy + dy_off + co * OHW, Cin, Cout, H, W, OH, OW, p_h, p_w, r_begin,
                        r_end, lid, 4, ((x_off - p_w + 1) & 3) == 0 && (W & 3) == 0,
                        (dy_off & 3) == 0 && (OW & 3) == 0, acc);
        else if (rows3)
            dw_dw_rows3(x + x_off + ci * HW, dy + dy_off + co * OHW, Cin, Cout, H, W, OH, OW, p_h, p_w, r_begin,
                        r_end, lid, 1, 0, 0, acc);
        else
#endif
            for (int r = r_begin + lid; r < r_end; r += DW_WG) {
                float g = dy[dy_off + (at.c * Cout + co) * OHW + at.h * OW + at.w];
                __global const float *xc = x + x_off + (at.c * Cin + ci) * HW;
                int ihb = at.h * s_h - p_h, iwb = at.w * s_w - p_w, kh = kh0, kw = kw0;
                TEENY_UNROLL
                for (int t = 0; t < DW_TAPS; t++) {
                    int ih = ihb + kh * d_h, iw = iwb + kw * d_w;
                    if (t0 + t < KHW && (uint)ih < (uint)H && (uint)iw < (uint)W)
                        acc[t] = TEENY_MAD(g, xc[ih * W + iw], acc[t]);
                    if (++kw == KW) {
                        kw = 0;
                        kh++;
                    }
                }
                at = idx_add(at, step, OH, OW);
            }
        for (int t = 0; t < DW_TAPS; t++)
            red[t * DW_WG + lid] = acc[t];
        teeny_group_sum_rows(red, lid, DW_WG, DW_TAPS);
        if (lid < DW_TAPS && t0 + lid < KHW)
            o[t0 + lid] = red[lid * DW_WG];
        barrier(CLK_LOCAL_MEM_FENCE); /* red is reused by the next pass */
    }
}
