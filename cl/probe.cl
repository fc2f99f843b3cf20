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
