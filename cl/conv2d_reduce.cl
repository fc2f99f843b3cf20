/*
 * conv2d_reduce.cl -- the fixed-order reductions: conv_dbias_part and
 * conv_reduce_parts. The conv2d program's last part, after
 * conv2d_dw_cpu.cl.
 */
/* ---- reductions ---- */

/* Grid (DW_WG * Z, Cout), work-group (DW_WG): group (z, co) sums dy[b, co]
 * over batches [z*b_chunk, +b_chunk), items striding over OH*OW, then a
 * tree sum; the result goes to out[out_off + z*Cout + co]. */
__kernel __attribute__((reqd_work_group_size(DW_WG, 1, 1)))
void conv_dbias_part(__global const float *restrict dy, int dy_off, __global float *restrict out, int out_off,
                     int B, int Cout, int OHW, int b_chunk)
{
    __local float red[DW_WG];
    const int lid = get_local_id(0), z = get_group_id(0), co = get_group_id(1);
    const int b_end = min(B, z * b_chunk + b_chunk);
    float s = 0.0f;
    for (int b = z * b_chunk; b < b_end; b++) {
        __global const float *p = dy + dy_off + (b * Cout + co) * OHW;
        for (int i = lid; i < OHW; i += DW_WG)
            s += p[i];
    }
    red[lid] = s;
    teeny_group_sum(red, lid, DW_WG);
    if (lid == 0)
        out[out_off + z * Cout + co] = red[0];
}

/* Grid (n): out[out_off + i] = sum over z < Z of part[part_off + z*n + i],
 * in order of z. */
__kernel void conv_reduce_parts(__global const float *restrict part, int part_off, int n, int Z,
                                __global float *restrict out, int out_off)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    float s = 0.0f;
    for (int z = 0; z < Z; z++)
        s += part[part_off + z * n + i];
    out[out_off + i] = s;
}
