/*
 * norm.cl -- softmax / log-softmax along one axis and layer normalization
 * over trailing axes, with their gradients.
 * Softmax sees x as [outer, L, inner] (the axis in the middle); layer norm
 * as [M, N] rows (N the normalized elements). One work-item per softmax
 * line or layer-norm row, looping over it in order (deterministic); the
 * host keeps those loops within the device's loop budget. Every buffer
 * comes with an element offset (views).
 */

/* Grid (outer * inner): item (o, i) takes the line x[o, :, i]. y = exp(x -
 * max) / sum, or (log) x - max - log(sum). masked_zero (not with log): a
 * line whose every element is -inf gives 0 (exponentials against 0, a
 * zero sum taken as no sum), where the plain softmax gives NaN; any other
 * line is the plain softmax's, bit for bit. */
__kernel void sm_forward(__global const float *x, int x_off, __global float *y, int y_off, int L, int inner,
                         int lines, int log_out, int masked_zero)
{
    int t = get_global_id(0);
    if (t >= lines)
        return;
    int base = (t / inner) * L * inner + t % inner;
    __global const float *xl = x + x_off + base;
    __global float *yl = y + y_off + base;
    float m = -INFINITY, s = 0.0f;
    for (int l = 0; l < L; l++)
        m = fmax(m, xl[l * inner]);
    if (masked_zero && m == -INFINITY)
        m = 0.0f;
    for (int l = 0; l < L; l++)
        s += exp(xl[l * inner] - m);
    float ls = log(s), r = masked_zero && s == 0.0f ? 0.0f : 1.0f / s;
    for (int l = 0; l < L; l++)
        yl[l * inner] = log_out ? xl[l * inner] - m - ls : exp(xl[l * inner] - m) * r;
}

/* Grid (outer * inner), from the forward's y: softmax dx = y (dy - sum(dy
 * y)); log-softmax dx = dy - exp(y) sum(dy). */
__kernel void sm_backward(__global const float *y, int y_off, __global const float *dy, int dy_off,
                          __global float *dx, int dx_off, int L, int inner, int lines, int log_out)
{
    int t = get_global_id(0);
    if (t >= lines)
        return;
    int base = (t / inner) * L * inner + t % inner;
    __global const float *yl = y + y_off + base, *gl = dy + dy_off + base;
    __global float *dl = dx + dx_off + base;
    float s = 0.0f;
    for (int l = 0; l < L; l++)
        s += log_out ? gl[l * inner] : gl[l * inner] * yl[l * inner];
    for (int l = 0; l < L; l++)
        dl[l * inner] = log_out ? gl[l * inner] - exp(yl[l * inner]) * s : yl[l * inner] * (gl[l * inner] - s);
}

/* Grid (M): row r of x [M, N]: mean, then the variance about it (two
 * passes), then y = (x - mean) rstd w + b (w, b [N]; has_b 0: no bias).
 * mean and rstd [M] are written when has_saved. */
__kernel void ln_forward(__global const float *x, int x_off, __global const float *w, int w_off,
                         __global const float *b, int b_off, int has_b, __global float *y, int y_off,
                         __global float *mean, int mean_off, __global float *rstd, int rstd_off, int has_saved, int M,
                         int N, float eps)
{
    int r = get_global_id(0);
    if (r >= M)
        return;
    __global const float *xr = x + x_off + r * N;
    __global float *yr = y + y_off + r * N;
    float s = 0.0f, v = 0.0f;
    for (int i = 0; i < N; i++)
        s += xr[i];
    float mu = s / N;
    for (int i = 0; i < N; i++) {
        float d = xr[i] - mu;
        v += d * d;
    }
    float rs = 1.0f / sqrt(v / N + eps);
    for (int i = 0; i < N; i++)
        yr[i] = (xr[i] - mu) * rs * w[w_off + i] + (has_b ? b[b_off + i] : 0.0f);
    if (has_saved) {
        mean[mean_off + r] = mu;
        rstd[rstd_off + r] = rs;
    }
}

/* Grid (M): dx of row r = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w,
 * xhat = (x - mean) rstd. */
__kernel void ln_backward_dx(__global const float *x, int x_off, __global const float *w, int w_off,
                             __global const float *dy, int dy_off, __global const float *mean, int mean_off,
                             __global const float *rstd, int rstd_off, __global float *dx, int dx_off, int M, int N)
{
    int r = get_global_id(0);
    if (r >= M)
        return;
    __global const float *xr = x + x_off + r * N, *gr = dy + dy_off + r * N;
    __global float *dr = dx + dx_off + r * N;
    float mu = mean[mean_off + r], rs = rstd[rstd_off + r], sg = 0.0f, sgx = 0.0f;
    for (int i = 0; i < N; i++) {
        float g = gr[i] * w[w_off + i];
        sg += g;
        sgx += g * (xr[i] - mu) * rs;
    }
    sg /= N;
    sgx /= N;
    for (int i = 0; i < N; i++)
        dr[i] = rs * (gr[i] * w[w_off + i] - sg - (xr[i] - mu) * rs * sgx);
}

/* Grid (M * N): t = dy xhat, whose column sums are dw. */
__kernel void ln_dy_xhat(__global const float *x, int x_off, __global const float *dy, int dy_off,
                         __global const float *mean, int mean_off, __global const float *rstd, int rstd_off,
                         __global float *t, int N, int total)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    int r = i / N;
    t[i] = dy[dy_off + i] * (x[x_off + i] - mean[mean_off + r]) * rstd[rstd_off + r];
}
