/*
 * info_check.h -- teeny-info --check's two halves: the cases (info_cases.c:
 * one small run per kernel family, with a float64 host reference written
 * here, since tools cannot link tests/ref) and the runner (info_check.c:
 * each case in a child process with a time limit, the table and the
 * verdicts). teeny-info.c calls the runner, the runner the cases.
 */
#ifndef TEENY_INFO_CHECK_H
#define TEENY_INFO_CHECK_H

#include <stdint.h>

#include "teenycl.h"

#define MAX_TENSORS 32
#define MAX_OUTPUTS 8

/* One case's tensors and the outputs it wants compared. */
typedef struct {
    teeny_ctx *ctx;
    teeny_status st;     /* first failure; later calls are skipped */
    const char *failed;  /* the call that failed */
    teeny_tensor *tensors[MAX_TENSORS];
    int n_tensors;
    struct {
        teeny_tensor *t;
        const double *ref;
        const char *name;
    } outs[MAX_OUTPUTS];
    int n_outs;
    uint32_t seed;
} check_run;

/* One family's case: it enqueues its calls on r (a failure is kept in
 * r->st) and names the outputs to compare with expect. */
typedef struct {
    const char *family; /* cl/<family>.cl */
    const char *what;   /* what the case runs */
    void (*run)(check_run *r);
} check_case;

/* One case per kernel family, in the order the table lists them
 * (info_cases.c); the array's length is checked against INFO_N_CASES. */
enum { INFO_N_CASES = 11 };
extern const check_case info_cases[INFO_N_CASES];

/* --check: every family (or those in the comma-separated only) on spec,
 * each in a child process given timeout_s seconds; prints the table and
 * the failures. Returns the exit status: 0, or 1 if any family failed. */
int info_check_device(const char *spec, int timeout_s, const char *only);

/* Every name in the comma-separated list (--only, and the test hooks'
 * variables; what names it) is a family of info_cases: 1, or 0 after
 * saying which is not and listing the families. An empty list or name is
 * not one either. */
int info_families_known(const char *what, const char *list);

#endif
