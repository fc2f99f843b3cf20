/*
 * optim.cl -- optimizer steps (SGD, Adam, AdamW) and gradient clipping by
 * global norm, with PyTorch's semantics (see src/ops/optim.c).
 *
 * optim_sgd works on one parameter tensor: grid n (rounded up to the
 * work-group size), one work-item per element; optim_adam_multi on up to
 * OPT_SLOTS tensors at once, one work-item per element of each. Per-step scalars (lr,
 * beta1, bias corrections) come from a small device buffer `scal` that the
 * host rewrites each step, so kernel arguments never change after
 * creation; the clipping scale comes from red[0], written on the device.
 *
 * Clipping is a deterministic two-pass reduction with no atomics:
 *   1. optim_sumsq: work-group j of one grad tensor sums the squares of a
 *      fixed strided slice into red[part_off + j];
 *   2. optim_clip_scale: one work-group sums all partials in a fixed order
 *      and writes scale = min(max_norm / (sqrt(total) + 1e-6), 1) to red[0]
 *      (a NaN total gives a NaN scale, as torch.clamp does).
 *
 * Tunable: OPT_WG, the reduction work-group size (a power of two);
 * OPT_SLOTS, the parameters per Adam launch.
 */
#ifndef OPT_WG
#define OPT_WG 256
#endif

/* Slots of the per-step scalar buffer; src/ops/optim.c fills them. */
#define OPT_LR 0
#define OPT_BETA1 1
#define OPT_ONE_MINUS_BETA1 2
#define OPT_STEP_SIZE 3     /* lr / (1 - beta1^t) */
#define OPT_BC2_SQRT 4      /* sqrt(1 - beta2^t) */
#define OPT_DECAY 5         /* 1 - lr * weight_decay (AdamW) */
#define OPT_FIRST 6         /* 1 on the first step (SGD momentum init) */

/* Work-group tree sum; the result is in acc[0] for every item. */
TEENY_INLINE float opt_group_sum(__local float *acc, int lid, float v)
{
    acc[lid] = v;
    teeny_group_sum(acc, lid, OPT_WG);
    return acc[0];
}

/* Grid (OPT_WG * groups), work-group OPT_WG: partial sum of squares of
 * g[g_off .. g_off + n) over elements gid, gid + grid, ... */
__kernel __attribute__((reqd_work_group_size(OPT_WG, 1, 1)))
void optim_sumsq(__global const float *g, int g_off, int n, __global float *red, int part_off)
{
    __local float acc[OPT_WG];
    int lid = get_local_id(0);
    size_t stride = get_global_size(0);
    float s = 0.0f;
    for (size_t i = get_global_id(0); i < (size_t)n; i += stride) {
        float v = g[g_off + i];
        s += v * v;
    }
    s = opt_group_sum(acc, lid, s);
    if (lid == 0)
        red[part_off + get_group_id(0)] = s;
}

/* One work-group: red[0] = clipping scale from the partials red[1 .. n_parts]. */
__kernel __attribute__((reqd_work_group_size(OPT_WG, 1, 1)))
void optim_clip_scale(__global float *red, int n_parts, float max_norm)
{
    __local float acc[OPT_WG];
    int lid = get_local_id(0);
    float s = 0.0f;
    for (int i = lid; i < n_parts; i += OPT_WG)
        s += red[1 + i];
    s = opt_group_sum(acc, lid, s);
    if (lid == 0) {
        float coef = max_norm / (sqrt(s) + 1e-6f);
        red[0] = coef > 1.0f ? 1.0f : coef;
    }
}

/* The gradient, clipped in place when clipping is on. */
TEENY_INLINE float opt_grad(__global float *g, int i, int clip, __global const float *red)
{
    float v = g[i];
    if (clip) {
        v *= red[0];
        g[i] = v;
    }
    return v;
}

/* torch.optim.SGD. buf is unused (any buffer) when momentum == 0. */
__kernel void optim_sgd(__global float *p, int p_off, __global float *g, int g_off, __global float *buf, int b_off,
                        int n, float momentum, float dampening, float weight_decay, int nesterov, int clip,
                        __global const float *scal, __global const float *red)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    float d = opt_grad(g, g_off + i, clip, red);
    float w = p[p_off + i];
    if (weight_decay != 0.0f)
        d += weight_decay * w;
    if (momentum != 0.0f) {
        float b = scal[OPT_FIRST] != 0.0f ? d : buf[b_off + i] * momentum + (1.0f - dampening) * d;
        buf[b_off + i] = b;
        d = nesterov ? d + momentum * b : b;
    }
    p[p_off + i] = w - scal[OPT_LR] * d;
}

/* torch.optim.Adam (decoupled = 0, L2 weight decay) and AdamW (decoupled = 1)
 * on element i of one parameter. */
TEENY_INLINE void opt_adam_elem(__global float *p, __global float *g, __global float *m, __global float *v, int i,
                                float beta2, float one_minus_beta2, float eps, float weight_decay, int decoupled,
                                int clip, __global const float *scal, __global const float *red)
{
    float grad = opt_grad(g, i, clip, red);
    float w = p[i];
    if (decoupled)
        w *= scal[OPT_DECAY];
    else if (weight_decay != 0.0f)
        grad += weight_decay * w;
    float mm = m[i];
    mm += scal[OPT_ONE_MINUS_BETA1] * (grad - mm);
    float vv = v[i] * beta2 + one_minus_beta2 * grad * grad;
    m[i] = mm;
    v[i] = vv;
    float denom = sqrt(vv) / scal[OPT_BC2_SQRT] + eps;
    p[i] = w - scal[OPT_STEP_SIZE] * (mm / denom);
}

/* Adam / AdamW over OPT_SLOTS parameters in one launch (1 .. 8: as many as
 * the device's kernel-argument space takes, src/ops/optim.c). Slot k is a
 * parameter with its gradient and state (buffer and element offset each),
 * n elements, and the first global index it owns, b (a multiple of the
 * work-group size, increasing with k): slot k's element j is work-item
 * b + j, so each work-group updates one slot's elements. An unused slot
 * has n = 0 and b = INT_MAX. The work-item picks its slot's pointers first
 * (the last slot with b <= its index) and then runs one update: a CPU
 * compiler vectorizes that across work-items, where eight guarded copies
 * of the update ran 20 to 200 times slower on PoCL. */
#ifndef OPT_SLOTS
#define OPT_SLOTS 8
#endif
#define OPT_SLOT_ARGS(k)                                                                                \
    , __global float *p##k, int po##k, __global float *g##k, int go##k, __global float *m##k, int mo##k, \
        __global float *v##k, int vo##k, int n##k, int b##k
#define OPT_SLOT_PICK(k)                                                                                \
    if (gid >= b##k) {                                                                                 \
        P = p##k + po##k, G = g##k + go##k, M = m##k + mo##k, V = v##k + vo##k, n = n##k, b = b##k;     \
    }
#if OPT_SLOTS >= 2
#define OPT_SLOTS_ARGS_2 OPT_SLOT_ARGS(1)
#define OPT_SLOTS_PICK_2 OPT_SLOT_PICK(1)
#else
#define OPT_SLOTS_ARGS_2
#define OPT_SLOTS_PICK_2
#endif
#if OPT_SLOTS >= 3
#define OPT_SLOTS_ARGS_3 OPT_SLOTS_ARGS_2 OPT_SLOT_ARGS(2)
#define OPT_SLOTS_PICK_3 OPT_SLOTS_PICK_2 OPT_SLOT_PICK(2)
#else
#define OPT_SLOTS_ARGS_3 OPT_SLOTS_ARGS_2
#define OPT_SLOTS_PICK_3 OPT_SLOTS_PICK_2
#endif
#if OPT_SLOTS >= 4
#define OPT_SLOTS_ARGS_4 OPT_SLOTS_ARGS_3 OPT_SLOT_ARGS(3)
#define OPT_SLOTS_PICK_4 OPT_SLOTS_PICK_3 OPT_SLOT_PICK(3)
#else
#define OPT_SLOTS_ARGS_4 OPT_SLOTS_ARGS_3
#define OPT_SLOTS_PICK_4 OPT_SLOTS_PICK_3
#endif
#if OPT_SLOTS >= 5
#define OPT_SLOTS_ARGS_5 OPT_SLOTS_ARGS_4 OPT_SLOT_ARGS(4)
#define OPT_SLOTS_PICK_5 OPT_SLOTS_PICK_4 OPT_SLOT_PICK(4)
#else
#define OPT_SLOTS_ARGS_5 OPT_SLOTS_ARGS_4
#define OPT_SLOTS_PICK_5 OPT_SLOTS_PICK_4
#endif
#if OPT_SLOTS >= 6
#define OPT_SLOTS_ARGS_6 OPT_SLOTS_ARGS_5 OPT_SLOT_ARGS(5)
#define OPT_SLOTS_PICK_6 OPT_SLOTS_PICK_5 OPT_SLOT_PICK(5)
#else
#define OPT_SLOTS_ARGS_6 OPT_SLOTS_ARGS_5
#define OPT_SLOTS_PICK_6 OPT_SLOTS_PICK_5
#endif
#if OPT_SLOTS >= 7
#define OPT_SLOTS_ARGS_7 OPT_SLOTS_ARGS_6 OPT_SLOT_ARGS(6)
#define OPT_SLOTS_PICK_7 OPT_SLOTS_PICK_6 OPT_SLOT_PICK(6)
#else
#define OPT_SLOTS_ARGS_7 OPT_SLOTS_ARGS_6
#define OPT_SLOTS_PICK_7 OPT_SLOTS_PICK_6
#endif
#if OPT_SLOTS >= 8
#define OPT_SLOTS_ARGS OPT_SLOTS_ARGS_7 OPT_SLOT_ARGS(7)
#define OPT_SLOTS_PICK OPT_SLOTS_PICK_7 OPT_SLOT_PICK(7)
#else
#define OPT_SLOTS_ARGS OPT_SLOTS_ARGS_7
#define OPT_SLOTS_PICK OPT_SLOTS_PICK_7
#endif

__kernel void optim_adam_multi(__global float *p0, int po0, __global float *g0, int go0, __global float *m0, int mo0,
                               __global float *v0, int vo0, int n0, int b0 OPT_SLOTS_ARGS, float beta2,
                               float one_minus_beta2, float eps, float weight_decay, int decoupled, int clip,
                               __global const float *scal, __global const float *red)
{
    int gid = (int)get_global_id(0);
    __global float *P = p0 + po0, *G = g0 + go0, *M = m0 + mo0, *V = v0 + vo0;
    int n = n0, b = b0;
    OPT_SLOTS_PICK
    if (gid - b < n)
        opt_adam_elem(P, G, M, V, gid - b, beta2, one_minus_beta2, eps, weight_decay, decoupled, clip, scal, red);
}
