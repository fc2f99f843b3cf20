/*
 * concat.cl -- copies of channel ranges between tensors [B, C, S] (S the
 * product of the dimensions after the channels: H*W for NCHW, 1 for NC).
 * Concatenation, split and slicing all reduce to these.
 * Grid: one work-item per element written, 1-D; every buffer argument
 * comes with an element offset (views).
 */

/* Grid (B*count*S): item i = (b*count + c)*S + s copies channel src_c0 + c
 * of src [B, src_C, S] to channel dst_c0 + c of dst [B, dst_C, S]. */
__kernel void cat_copy(__global const float *src, int src_off, int src_C, int src_c0,
                       __global float *dst, int dst_off, int dst_C, int dst_c0, int count, int S, int total)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    int s = i % S, t = i / S, c = t % count, b = t / count;
    dst[dst_off + (b * dst_C + dst_c0 + c) * S + s] = src[src_off + (b * src_C + src_c0 + c) * S + s];
}

/* The CPU variant (TEENY_VARIANT_CPU, concat.c): channels [src_c0, +
 * count) of one batch row are one run of count*S floats in src and in
 * dst. Grid (ceil(count*S / chunk), B): item (q, b) copies floats
 * [q*chunk, + chunk) of batch row b's run, 16 at a time, where the
 * portable kernel's item divides its index twice to copy one float (a
 * DenseNet-121 forward's 737 concatenation copies took 69 ms of its 189
 * on PoCL 3.1, 2 threads). The host keeps chunk / 16 + 16 within the
 * device's loop budget. */
__kernel void cat_copy_cpu(__global const float *restrict src, int src_off, int src_C, int src_c0,
                           __global float *restrict dst, int dst_off, int dst_C, int dst_c0, int count, int S,
                           int chunk)
{
    const int q = get_global_id(0), b = get_global_id(1), run = count * S, j0 = q * chunk;
    if (j0 >= run)
        return;
    __global const float *s = src + src_off + (b * src_C + src_c0) * S;
    __global float *d = dst + dst_off + (b * dst_C + dst_c0) * S;
    const int j1 = min(run, j0 + chunk);
    int j = j0;
    for (; j + 16 <= j1; j += 16)
        vstore16(vload16(0, s + j), 0, d + j);
    for (; j < j1; j++)
        d[j] = s[j];
}

/* Slice backward. Grid (B*C*S) over dx [B, C, S]: channels [c0, c0+count)
 * take dy [B, count, S], the others zero, so every element is written. */
__kernel void cat_slice_backward(__global const float *dy, int dy_off, __global float *dx, int dx_off, int C,
                                 int c0, int count, int S, int total)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    int s = i % S, t = i / S, c = t % C, b = t / C;
    dx[dx_off + i] = c >= c0 && c < c0 + count ? dy[dy_off + (b * count + c - c0) * S + s] : 0.0f;
}
