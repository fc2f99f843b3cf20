/*
 * layout.cl -- the one layout kernel that is not a strided copy
 * (cl/strided.cl holds those): gather's backward, a sum over repeated
 * indices. Every buffer comes with an element offset (views).
 */

/* Grid (numel of dx [outer, dim, inner]): item (o, j, i) sums dy [outer,
 * q, inner] over the indices k (in order) with idx[k] == j; slices no
 * index reads get 0. */
__kernel void lay_gather_backward(__global const int *idx, int i_off, int q, __global const float *dy, int dy_off,
                                  __global float *dx, int dx_off, int dim, int inner, int total)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    int in = i % inner, t = i / inner, j = t % dim, outer = t / dim;
    float s = 0.0f;
    for (int k = 0; k < q; k++)
        if (idx[i_off + k] == j)
            s += dy[dy_off + (outer * q + k) * inner + in];
    dx[dx_off + i] = s;
}
