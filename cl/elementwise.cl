/*
 * elementwise.cl -- element-wise add, multiply and activations.
 * Grid: one work-item per element (1-D, rounded up to the work-group size);
 * every buffer argument comes with an element offset (views).
 */

__kernel void ew_add(__global const float *a, int a_off, __global const float *b, int b_off,
                     __global float *y, int y_off, int n)
{
    int i = get_global_id(0);
    if (i < n)
        y[y_off + i] = a[a_off + i] + b[b_off + i];
}

__kernel void ew_act_forward(int act, __global const float *x, int x_off, __global float *y, int y_off, int n)
{
    int i = get_global_id(0);
    if (i < n)
        y[y_off + i] = teeny_act(act, x[x_off + i]);
}

__kernel void ew_act_backward(int act, __global const float *x, int x_off, __global const float *dy, int dy_off,
                              __global float *dx, int dx_off, int n)
{
    int i = get_global_id(0);
    if (i < n)
        dx[dx_off + i] = dy[dy_off + i] * teeny_act_grad(act, x[x_off + i]);
}

__kernel void ew_mul(__global const float *a, int a_off, __global const float *b, int b_off,
                     __global float *y, int y_off, int n)
{
    int i = get_global_id(0);
    if (i < n)
        y[y_off + i] = a[a_off + i] * b[b_off + i];
}

/* Both gradients in one pass. Each item reads its three inputs before it
 * writes, so da or db may alias an input exactly; a missing output
 * (has_* = 0) is handed some other buffer and never touched. */
__kernel void ew_mul_backward(__global const float *a, int a_off, __global const float *b, int b_off,
                              __global const float *dy, int dy_off, __global float *da, int da_off, int has_da,
                              __global float *db, int db_off, int has_db, int n)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    float av = a[a_off + i], bv = b[b_off + i], g = dy[dy_off + i];
    if (has_da)
        da[da_off + i] = g * bv;
    if (has_db)
        db[db_off + i] = g * av;
}

/* Grid (n): y[y_off + i] = bits. Fills and uploads go through these two
 * only on devices whose host-side stores an analysis tool cannot track
 * (ctx->kernel_stores, src/core/simulator.c); 32-bit words, so NaN payloads and
 * int32 tensors pass unchanged. */
__kernel void ew_fill(__global uint *y, int y_off, uint bits, int n)
{
    int i = get_global_id(0);
    if (i < n)
        y[y_off + i] = bits;
}

/* Grid (n): y[y_off + i] = x[i]. */
__kernel void ew_copy(__global const uint *x, __global uint *y, int y_off, int n)
{
    int i = get_global_id(0);
    if (i < n)
        y[y_off + i] = x[i];
}
