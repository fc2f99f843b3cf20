/*
 * elementwise.cl -- element-wise add, multiply and activations (the formulas:
 * cl/common.cl, TEENY_ACT_STMTS).
 * Grid: one work-item per element (1-D, rounded up to the work-group size);
 * every buffer argument comes with an element offset (views).
 */

/* ew_add, ew_copy2, ew_mul: vec 0, item i takes element i; vec 1 (the
 * host: every offset a multiple of 4), item i the float4 of elements
 * 4i .. 4i + 3, the last item the elements past the last whole float4. */
#define EW_F4(p, off, e) (*(__global float4 *)((p) + (off) + (e)))
#define EW_CF4(p, off, e) (*(__global const float4 *)((p) + (off) + (e)))

__kernel void ew_add(__global const float *a, int a_off, __global const float *b, int b_off,
                     __global float *y, int y_off, int n, int vec)
{
    int i = get_global_id(0), e = 4 * i;
    if (!vec) {
        if (i < n)
            y[y_off + i] = a[a_off + i] + b[b_off + i];
    } else if (e + 4 <= n) {
        EW_F4(y, y_off, e) = EW_CF4(a, a_off, e) + EW_CF4(b, b_off, e);
    } else {
        for (; e < n; e++)
            y[y_off + e] = a[a_off + e] + b[b_off + e];
    }
}

/* act with its parameters alpha, beta (cl/common.cl: TEENY_ACT_STMTS). */
__kernel void ew_act_forward(int act, float alpha, float beta, __global const float *x, int x_off,
                             __global float *y, int y_off, int n)
{
    int i = get_global_id(0);
    if (i < n)
        y[y_off + i] = teeny_act_p(act, x[x_off + i], alpha, beta);
}

__kernel void ew_act_backward(int act, float alpha, float beta, __global const float *x, int x_off,
                              __global const float *dy, int dy_off, __global float *dx, int dx_off, int n)
{
    int i = get_global_id(0);
    if (i < n)
        dx[dx_off + i] = dy[dy_off + i] * teeny_act_grad_p(act, x[x_off + i], alpha, beta);
}

/* The add's backward: both inputs' gradients are dy, in one launch. */
__kernel void ew_copy2(__global const float *x, int x_off, __global float *a, int a_off, __global float *b, int b_off,
                       int n, int vec)
{
    int i = get_global_id(0), e = 4 * i;
    if (!vec) {
        if (i < n) {
            float v = x[x_off + i];
            a[a_off + i] = v;
            b[b_off + i] = v;
        }
    } else if (e + 4 <= n) {
        float4 v = EW_CF4(x, x_off, e);
        EW_F4(a, a_off, e) = v;
        EW_F4(b, b_off, e) = v;
    } else {
        for (; e < n; e++) {
            float v = x[x_off + e];
            a[a_off + e] = v;
            b[b_off + e] = v;
        }
    }
}

__kernel void ew_mul(__global const float *a, int a_off, __global const float *b, int b_off,
                     __global float *y, int y_off, int n, int vec)
{
    int i = get_global_id(0), e = 4 * i;
    if (!vec) {
        if (i < n)
            y[y_off + i] = a[a_off + i] * b[b_off + i];
    } else if (e + 4 <= n) {
        EW_F4(y, y_off, e) = EW_CF4(a, a_off, e) * EW_CF4(b, b_off, e);
    } else {
        for (; e < n; e++)
            y[y_off + e] = a[a_off + e] * b[b_off + e];
    }
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

/* ---- CPU variants (TEENY_VARIANT_CPU, src/tune) ----
 * A work-item takes a run of EW_RUN elements, sixteen at a time as float16
 * (so the exp of SiLU is a vector call), then the tail one by one: PoCL
 * vectorizes across work-items only in code without loops or calls it
 * cannot widen. Grid (ceil(n / EW_RUN)). Same formulas as above. */
#define EW_RUN 2048

TEENY_INLINE float16 ew_act16(int act, float16 x, float alpha, float beta)
{
    TEENY_ACT_STMTS(float16, act, x, alpha, beta);
}

TEENY_INLINE float16 ew_act_grad16(int act, float16 x, float alpha, float beta)
{
    TEENY_ACT_GRAD_STMTS(float16, act, x, alpha, beta);
}

#define EW_RUN_BOUNDS                                                                                              \
    const int e0 = get_global_id(0) * EW_RUN, e1 = min(n, e0 + EW_RUN);                                           \
    int e = e0

__kernel void ew_add_cpu(__global const float *a, int a_off, __global const float *b, int b_off,
                         __global float *y, int y_off, int n)
{
    EW_RUN_BOUNDS;
    for (; e + 16 <= e1; e += 16)
        vstore16(vload16(0, a + a_off + e) + vload16(0, b + b_off + e), 0, y + y_off + e);
    for (; e < e1; e++)
        y[y_off + e] = a[a_off + e] + b[b_off + e];
}

__kernel void ew_copy2_cpu(__global const float *x, int x_off, __global float *a, int a_off, __global float *b,
                           int b_off, int n)
{
    EW_RUN_BOUNDS;
    for (; e + 16 <= e1; e += 16) {
        float16 v = vload16(0, x + x_off + e);
        vstore16(v, 0, a + a_off + e);
        vstore16(v, 0, b + b_off + e);
    }
    for (; e < e1; e++)
        a[a_off + e] = b[b_off + e] = x[x_off + e];
}

__kernel void ew_act_forward_cpu(int act, float alpha, float beta, __global const float *x, int x_off,
                                 __global float *y, int y_off, int n)
{
    EW_RUN_BOUNDS;
    for (; e + 16 <= e1; e += 16)
        vstore16(ew_act16(act, vload16(0, x + x_off + e), alpha, beta), 0, y + y_off + e);
    for (; e < e1; e++)
        y[y_off + e] = teeny_act_p(act, x[x_off + e], alpha, beta);
}

__kernel void ew_act_backward_cpu(int act, float alpha, float beta, __global const float *x, int x_off,
                                  __global const float *dy, int dy_off, __global float *dx, int dx_off, int n)
{
    EW_RUN_BOUNDS;
    for (; e + 16 <= e1; e += 16)
        vstore16(vload16(0, dy + dy_off + e) * ew_act_grad16(act, vload16(0, x + x_off + e), alpha, beta), 0,
                 dx + dx_off + e);
    for (; e < e1; e++)
        dx[dx_off + e] = dy[dy_off + e] * teeny_act_grad_p(act, x[x_off + e], alpha, beta);
}
