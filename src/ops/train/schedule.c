/*
 * schedule.c -- learning-rate schedules, computed on the host per step
 * (teeny_lr_at): constant, step decay, cosine annealing and PyTorch's
 * OneCycleLR with its momentum cycle. Split from optim.c, whose steps take
 * the values this computes.
 */
#include <math.h>

#include "../ops.h"

static double cos_anneal(double start, double end, double pct)
{
    return end + (start - end) / 2.0 * (cos(3.14159265358979323846 * pct) + 1.0);
}

/* One-cycle as PyTorch's OneCycleLR (two phases, three_phase=False):
 * phase 1 ends at step pct_start * total - 1, phase 2 at total - 1; a step
 * belongs to the first phase whose end it does not pass (the last phase
 * takes everything after), and pct = (step - phase start) / (phase end -
 * phase start), the start of phase 1 being 0 and of phase 2 the end of
 * phase 1. For tiny totals phase 1 may end before step 0 (negative end),
 * so every step is in phase 2, exactly as in PyTorch. Where PyTorch would
 * divide 0 by 0 (a phase of zero length, e.g. pct_start * total == 1 at
 * step 0) the step is at that phase's end, so it takes the end values. */
static void one_cycle(const teeny_lr_schedule *s, int64_t step, double *lr, double *b1)
{
    double initial = s->max_lr / s->div_factor, min_lr = initial / s->final_div_factor;
    const double end[2] = {s->pct_start * (double)s->total_steps - 1.0, (double)s->total_steps - 1.0};
    const double lr0[2] = {initial, s->max_lr}, lr1[2] = {s->max_lr, min_lr};
    const double m0[2] = {s->max_momentum, s->base_momentum}, m1[2] = {s->base_momentum, s->max_momentum};
    double start = 0.0, x = (double)step;
    for (int i = 0; i < 2; i++) {
        if (x <= end[i] || i == 1) {
            double span = end[i] - start, pct = span != 0.0 ? (x - start) / span : 1.0;
            *lr = cos_anneal(lr0[i], lr1[i], pct);
            *b1 = cos_anneal(m0[i], m1[i], pct);
            return;
        }
        start = end[i];
    }
}

static int finite_nonneg(double v)
{
    return isfinite(v) && v >= 0.0;
}

teeny_status teeny_lr_at(const teeny_lr_schedule *s, int64_t step, double *lr, double *beta1)
{
    double b1 = -1.0, v;
    /* context-less: details go to teeny_last_error(NULL); clear it so a
     * stale message never stands in for this call's */
    teeny__clear_error(NULL);
    if (!s || !lr)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_lr_at: %s is NULL", !s ? "schedule" : "lr");
    if (!finite_nonneg(s->max_lr) || step < 0)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_lr_at: max_lr %g must be finite and >= 0, step %lld >= 0",
                            s->max_lr, (long long)step);
    switch (s->kind) {
    case TEENY_LR_CONSTANT:
        v = s->max_lr;
        break;
    case TEENY_LR_STEP:
        if (s->step_size < 1 || !finite_nonneg(s->gamma))
            return teeny__error(NULL, TEENY_ERR_ARG, "teeny_lr_at: step_size %lld < 1 or gamma %g not finite and >= 0",
                                (long long)s->step_size, s->gamma);
        v = s->max_lr * pow(s->gamma, (double)(step / s->step_size));
        break;
    case TEENY_LR_COSINE:
        if (s->total_steps < 1 || step >= s->total_steps || !isfinite(s->min_lr))
            return teeny__error(NULL, TEENY_ERR_ARG,
                                "teeny_lr_at: step %lld outside [0, total_steps %lld) or min_lr %g not finite",
                                (long long)step, (long long)s->total_steps, s->min_lr);
        v = s->min_lr + (s->max_lr - s->min_lr) * (1.0 + cos(3.14159265358979323846 * (double)step /
                                                               (double)s->total_steps)) / 2.0;
        break;
    case TEENY_LR_ONE_CYCLE:
        /* PyTorch's OneCycleLR accepts any total_steps >= 1 and pct_start in [0, 1] */
        if (s->total_steps < 1 || step >= s->total_steps || !(s->pct_start >= 0.0 && s->pct_start <= 1.0) ||
            !(isfinite(s->div_factor) && s->div_factor > 0.0) ||
            !(isfinite(s->final_div_factor) && s->final_div_factor > 0.0) ||
            (s->cycle_momentum && !(isfinite(s->base_momentum) && isfinite(s->max_momentum))))
            return teeny__error(NULL, TEENY_ERR_ARG,
                                "teeny_lr_at: one-cycle needs step %lld in [0, total_steps %lld), pct_start %g in "
                                "[0, 1], finite positive div factors and finite momenta",
                                (long long)step, (long long)s->total_steps, s->pct_start);
        one_cycle(s, step, &v, &b1);
        if (!s->cycle_momentum)
            b1 = -1.0;
        break;
    default:
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_lr_at: unknown schedule kind %d", (int)s->kind);
    }
    *lr = v;
    if (beta1)
        *beta1 = b1;
    return TEENY_OK;
}

