/*
 * elementwise.cl -- element-wise add and activations.
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
