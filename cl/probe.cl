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

#ifdef TEENY_PROBE_TF32
/* Grid (32), work-group (32): one warp computes c (16 x 8) = a (16 x 8) b
 * (8 x 8), all row-major, with one tf32 mma.sync.m16n8k8 in inline PTX
 * (fragments as in cl/conv2d.cl's TEENY_TF32 section). Built only where
 * the device's compiler may take inline PTX; the host checks the result
 * exactly (its inputs are exact in tf32 and their sums in fp32). */
__kernel void probe_tf32_mma(__global const float *a, __global const float *b, __global float *c)
{
    const int lane = get_local_id(0) & 31, r = lane >> 2, k = lane & 3;
    uint a0 = as_uint(a[r * 8 + k]), a1 = as_uint(a[(r + 8) * 8 + k]), a2 = as_uint(a[r * 8 + k + 4]),
         a3 = as_uint(a[(r + 8) * 8 + k + 4]), b0 = as_uint(b[k * 8 + r]), b1 = as_uint(b[(k + 4) * 8 + r]);
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    c[r * 8 + 2 * k] = c0;
    c[r * 8 + 2 * k + 1] = c1;
    c[(r + 8) * 8 + 2 * k] = c2;
    c[(r + 8) * 8 + 2 * k + 1] = c3;
}
#endif
