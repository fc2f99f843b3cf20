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
