/*
 * probe.cl -- capability probes: kernels whose results say what a device
 * really does where no clGetDeviceInfo query tells (src/program/probe.c
 * runs them once per context).
 */

/* Grid (1): out[0] = the trips a loop of n really ran. Counted in float
 * (exact below 2^24): a sum of 1.0f has no closed form a compiler may
 * substitute, so the loop runs as written. Mesa's llvmpipe (gallivm's loop
 * limiter) ends every loop of an invocation once all its loops together
 * have run 65535 trips, without an error; a conformant device returns n. */
__kernel void probe_loop_trips(__global float *out, int n)
{
    float trips = 0.0f;
    for (int i = 0; i < n; i++)
        trips += 1.0f;
    out[0] = trips;
}

#ifdef TEENY_TF32
/* Grid (32), work-group (32): one warp computes c (16 x 8) = a (16 x 8) b
 * (8 x 8), all row-major, with common.cl's tf32_mma (one mma.sync.m16n8k8),
 * and c[128 + lane] = lane ^ 1's first C element through tf32_shfl_xor:
 * the instructions the TEENY_TF32 kernels use. Built only where the
 * device's compiler may take inline PTX; the host checks the result
 * exactly (its inputs are exact in tf32 and their sums in fp32). */
__kernel void probe_tf32_mma(__global const float *a, __global const float *b, __global float *c)
{
    const int lane = get_local_id(0) & 31, r = lane >> 2, k = lane & 3;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    tf32_mma(acc, as_uint(a[r * 8 + k]), as_uint(a[(r + 8) * 8 + k]), as_uint(a[r * 8 + k + 4]),
             as_uint(a[(r + 8) * 8 + k + 4]), as_uint(b[k * 8 + r]), as_uint(b[(k + 4) * 8 + r]));
    c[r * 8 + 2 * k] = acc[0];
    c[r * 8 + 2 * k + 1] = acc[1];
    c[(r + 8) * 8 + 2 * k] = acc[2];
    c[(r + 8) * 8 + 2 * k + 1] = acc[3];
    c[128 + lane] = tf32_shfl_xor(acc[0], 1);
}
#endif
