/*
 * conv_transpose.cl -- the one kernel transposed convolution adds to
 * conv2d's (src/ops/conv_transpose.c runs the convolution's passes): the
 * bias, added after the input-gradient GEMM wrote y.
 */

/* Grid (B*C*S), 1-D: y[i] += bias[(i / S) % C] (y [B, C, S] NCHW). */
__kernel void convt_bias_add(__global float *y, int y_off, __global const float *bias, int b_off, int C, int S,
                             int total)
{
    int i = get_global_id(0);
    if (i < total)
        y[y_off + i] += bias[b_off + i / S % C];
}
