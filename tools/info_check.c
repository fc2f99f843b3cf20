/*
 * info_check.c -- teeny-info --check's runner: every kernel family's case
 * (info_cases.c) in its own child process with a time limit, so that a
 * driver whose compiler aborts or hangs on one family still gets the
 * others checked and the report names the family and the phase (building
 * or running). The child creates the context (the process's first OpenCL
 * call), holds the queue back behind a user event while the case builds,
 * then runs and compares, reporting one line per fact through a pipe; the
 * parent makes no OpenCL call, only forks, reads and waits, and turns
 * what it read (or the signal, or the timeout) into one verdict.
 *
 * Test hooks (tests/test_tools.sh; they make a healthy driver look
 * broken): TEENY_CHECK_CRASH=FAMILY raises SIGABRT in that family's child
 * when it starts building; TEENY_CHECK_HANG=FAMILY makes it sleep there
 * until the timeout kills it.
 */
/* fork, pipes, poll, clock_gettime, setenv: POSIX (check-install builds
 * this file with plain -std=c11, without the Makefile's -D) */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "info_check.h"

/* Errors are max |y - ref| / max(1, max |ref|) per output: absolute for
 * values of order 1 (all of info_cases.c), relative beyond. fp32 sums of
 * at most a few dozen terms stay far below this. */
#define CHECK_TOLERANCE 1e-4

/* ---- child side ---- */

/* One line to the parent; writes of at most PIPE_BUF bytes are atomic. */
static void report(int fd, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    for (int i = 0; i < n; i++)
        if (line[i] == '\n')
            line[i] = ' ';
    line[n++] = '\n';
    for (int off = 0; off < n;) {
        ssize_t w = write(fd, line + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (int)w;
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Send the lines of an error message that name errors (a build log's
 * "error:" lines), at most a few, or else its first line. */
static void report_summary(int fd, const char *msg)
{
    int sent = 0;
    for (const char *line = msg; *line && sent < 4;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len && (strstr(line, "error") && (size_t)(strstr(line, "error") - line) < len)) {
            report(fd, "log %.*s", (int)(len > 200 ? 200 : len), line);
            sent++;
        }
        line += len + (end != NULL);
    }
    if (!sent) {
        size_t len = strcspn(msg, "\n");
        report(fd, "log %.*s", (int)(len > 200 ? 200 : len), msg);
    }
}

static int env_is(const char *name, const char *family)
{
    const char *v = getenv(name);
    return v && !strcmp(v, family);
}

/* The gate: a marker that waits for a user event holds back everything
 * enqueued after it on the in-order queue, so "building" is the compiler
 * alone (builds happen inside the op calls) and the kernels first run
 * after "running" is reported. Oclgrind is left ungated (NULL): the
 * library makes blocking writes there (buffer shadows), which would wait
 * for the gate forever. Ends the child after reporting a failure. */
static cl_event hold_queue(int fd, teeny_ctx *ctx)
{
    cl_event gate = NULL;
    if (strstr(teeny_ctx_device_name(ctx), "Oclgrind"))
        return NULL;
    cl_command_queue q = teeny_ctx_cl_queue(ctx);
    cl_context clctx = NULL;
    cl_int err = clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof clctx, &clctx, NULL);
    if (err == CL_SUCCESS)
        gate = clCreateUserEvent(clctx, &err);
    if (err == CL_SUCCESS)
        err = clEnqueueMarkerWithWaitList(q, 1, &gate, NULL);
    if (err != CL_SUCCESS) {
        report(fd, "error OpenCL");
        report(fd, "log cannot hold the queue with a user event (OpenCL error %d)", (int)err);
        _exit(0);
    }
    return gate;
}

/* The largest error of the case's outputs against their references into
 * *worst (and the output's name); ends the child after reporting a
 * failed read. */
static void compare_outputs(int fd, check_run *r, double *worst, const char **worst_name)
{
    *worst = -1;
    *worst_name = "";
    for (int o = 0; o < r->n_outs; o++) {
        int64_t n = teeny_tensor_numel(r->outs[o].t);
        float *y = malloc((size_t)n * sizeof *y);
        double scale = 1, err = 0;
        if (!y) {
            report(fd, "error TEENY_ERR_NOMEM");
            _exit(0);
        }
        teeny_status st = teeny_tensor_read(r->outs[o].t, y, (size_t)n);
        if (st != TEENY_OK) {
            report(fd, "error %s", teeny_status_name(st));
            report(fd, "call teeny_tensor_read of %s", r->outs[o].name);
            report_summary(fd, teeny_last_error(r->ctx));
            _exit(0);
        }
        for (int64_t i = 0; i < n; i++)
            scale = fabs(r->outs[o].ref[i]) > scale ? fabs(r->outs[o].ref[i]) : scale;
        for (int64_t i = 0; i < n; i++) {
            double d = fabs(y[i] - r->outs[o].ref[i]) / scale;
            if (!(d <= err)) /* NaN (an element never written) counts as infinite */
                err = isnan(d) ? INFINITY : d;
        }
        if (err > *worst) {
            *worst = err;
            *worst_name = r->outs[o].name;
        }
        free(y);
    }
}

/* The whole life of one family's child: make a context (the first OpenCL
 * call of this process), build and enqueue the case behind a closed gate,
 * open it, compare. Never returns. */
static void check_child(int fd, const char *spec, const check_case *c)
{
    check_run r;
    cl_event gate;
    double build_ms;

    /* Cold builds: the timing is the compiler's, and a cached binary from an
     * earlier run would hide a compiler that crashes. Drivers keep caches of
     * their own too (PoCL's kernel cache, NVIDIA's compute cache, Mesa's
     * shader cache); each variable is ignored by the others. */
    setenv("TEENY_NO_CACHE", "1", 1);
    setenv("POCL_KERNEL_CACHE", "0", 1);
    setenv("CUDA_CACHE_DISABLE", "1", 1);
    setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
    memset(&r, 0, sizeof r);
    r.seed = 12345u;
    report(fd, "phase context");
    teeny_status st = teeny_ctx_create(spec, &r.ctx);
    if (st != TEENY_OK) {
        report(fd, "error %s", teeny_status_name(st));
        report(fd, "log %.200s", teeny_last_error(NULL));
        _exit(0);
    }
    report(fd, "device %s", teeny_ctx_device_name(r.ctx));

    gate = hold_queue(fd, r.ctx);

    report(fd, "phase building");
    if (env_is("TEENY_CHECK_CRASH", c->family)) {
        /* the default action: the driver's LLVM installs a SIGABRT handler
         * of its own, which would survive a plain raise */
        signal(SIGABRT, SIG_DFL);
        raise(SIGABRT);
    }
    if (env_is("TEENY_CHECK_HANG", c->family))
        for (;;)
            pause();
    build_ms = now_ms();
    c->run(&r);
    build_ms = now_ms() - build_ms;
    report(fd, "build_ms %.1f", build_ms);

    report(fd, "phase running");
    double run_ms = now_ms();
    if (gate)
        clSetUserEventStatus(gate, CL_COMPLETE);
    if (r.st != TEENY_OK) {
        report(fd, "error %s", teeny_status_name(r.st));
        report(fd, "call %s", r.failed);
        report_summary(fd, teeny_last_error(r.ctx));
        _exit(0);
    }
    double worst;
    const char *worst_name;
    compare_outputs(fd, &r, &worst, &worst_name);
    report(fd, "run_ms %.1f", now_ms() - run_ms);
    report(fd, "result %.3g %s", worst, worst_name);
    /* No cleanup: the process ends here, and _exit skips the driver's
     * atexit handlers, which some drivers run badly in a forked child. */
    _exit(0);
}

/* ---- parent side: no OpenCL here, only fork, pipes and waiting ---- */

typedef struct {
    char phase[32];
    char device[160];
    char error[64];
    char call[200];
    char log[4][210];
    int n_log;
    double build_ms, run_ms, max_err;
    char worst[32];
    int have_build, have_run, have_result;
} child_report;

/* Copy src into dst[cap], cut short where it does not fit (a field of a report). */
static void copy_field(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void parse_line(child_report *cr, const char *line)
{
    if (!strncmp(line, "phase ", 6))
        copy_field(cr->phase, sizeof cr->phase, line + 6);
    else if (!strncmp(line, "device ", 7))
        copy_field(cr->device, sizeof cr->device, line + 7);
    else if (!strncmp(line, "error ", 6))
        copy_field(cr->error, sizeof cr->error, line + 6);
    else if (!strncmp(line, "call ", 5))
        copy_field(cr->call, sizeof cr->call, line + 5);
    else if (!strncmp(line, "log ", 4) && cr->n_log < 4)
        copy_field(cr->log[cr->n_log++], sizeof cr->log[0], line + 4);
    else if (!strncmp(line, "build_ms ", 9))
        cr->have_build = sscanf(line + 9, "%lf", &cr->build_ms) == 1;
    else if (!strncmp(line, "run_ms ", 7))
        cr->have_run = sscanf(line + 7, "%lf", &cr->run_ms) == 1;
    else if (!strncmp(line, "result ", 7)) {
        cr->have_result = sscanf(line + 7, "%lf %31s", &cr->max_err, cr->worst) >= 1;
    }
}

static const char *signal_name(int sig, char *buf, size_t cap)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {{SIGABRT, "SIGABRT"}, {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGILL, "SIGILL"},
                 {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGTRAP, "SIGTRAP"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    snprintf(buf, cap, "signal %d", sig);
    return buf;
}

/* Read the child's report lines into cr until it exits or timeout_s
 * passes (then kill it: *hung); reap it into *status. */
static void wait_child(pid_t pid, int fd, int timeout_s, child_report *cr, int *status, int *hung)
{
    char buf[8192];
    size_t used = 0;
    int reaped = 0;
    *hung = 0;
    double deadline = now_ms() + timeout_s * 1e3;
    for (;;) {
        double left = deadline - now_ms();
        if (left <= 0 && !reaped) {
            *hung = 1;
            break;
        }
        struct pollfd pfd = {fd, POLLIN, 0};
        int n = poll(&pfd, 1, reaped ? 0 : left > 1e3 ? 1000 : (int)left + 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            /* The child may be gone while a helper process it started
             * still holds the pipe open: then read what is left and stop. */
            if (reaped)
                break;
            reaped = waitpid(pid, status, WNOHANG) == pid;
            continue;
        }
        ssize_t got = read(fd, buf + used, sizeof buf - 1 - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break; /* EOF: the child exited (or crashed) */
        used += (size_t)got;
        buf[used] = '\0';
        char *nl;
        while ((nl = strchr(buf, '\n')) != NULL) {
            *nl = '\0';
            parse_line(cr, buf);
            used -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, used + 1);
        }
        if (used == sizeof buf - 1)
            used = 0; /* an overlong line: dropped */
    }
    close(fd);
    if (*hung)
        kill(pid, SIGKILL);
    while (!reaped && waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
}

/* The one-line verdict on a child that ended as status says (or hung):
 * empty when it passed. */
static void write_verdict(const check_case *c, int timeout_s, const child_report *cr, int status, int hung,
                          char *verdict, size_t cap)
{
    static const char DASH[] = "\xe2\x80\x94"; /* an em dash, UTF-8 */
    int building = !strcmp(cr->phase, "building");
    char sigbuf[32];
    if (hung) {
        if (building)
            snprintf(verdict, cap,
                     "%s: the OpenCL compiler hung (no result after %d s) while building %s.cl %s killed; "
                     "this driver cannot run teenycl's %s; report it",
                     c->family, timeout_s, c->family, DASH, c->family);
        else
            snprintf(verdict, cap, "%s: hung (no result after %d s) while %s %s killed; report it", c->family,
                     timeout_s, !strcmp(cr->phase, "running") ? "running its kernels" : cr->phase, DASH);
    } else if (WIFSIGNALED(status)) {
        const char *sig = signal_name(WTERMSIG(status), sigbuf, sizeof sigbuf);
        if (building)
            snprintf(verdict, cap,
                     "%s: the OpenCL compiler crashed (%s) while building %s.cl %s this driver cannot run "
                     "teenycl's %s; report it",
                     c->family, sig, c->family, DASH, c->family);
        else if (!strcmp(cr->phase, "running"))
            snprintf(verdict, cap,
                     "%s: the driver crashed (%s) while running %s's kernels %s this driver cannot run "
                     "teenycl's %s; report it",
                     c->family, sig, c->family, DASH, c->family);
        else
            snprintf(verdict, cap, "%s: the driver crashed (%s) while %s", c->family, sig,
                     !strcmp(cr->phase, "context") ? "creating a context" : cr->phase);
    } else if (cr->error[0]) {
        if (!strcmp(cr->error, "TEENY_ERR_BUILD"))
            snprintf(verdict, cap, "%s: %s.cl does not build on this device (TEENY_ERR_BUILD); build log:", c->family,
                     c->family);
        else if (!strcmp(cr->phase, "context"))
            snprintf(verdict, cap, "%s: cannot create a context (%s):", c->family, cr->error);
        else
            snprintf(verdict, cap, "%s: %s while %s%s%s:", c->family, cr->error, cr->phase, cr->call[0] ? " in " : "",
                     cr->call);
    } else if (!cr->have_result) {
        snprintf(verdict, cap, "%s: the child exited (status %d) without a result while %s", c->family,
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, cr->phase);
    } else if (!(cr->max_err <= CHECK_TOLERANCE)) {
        snprintf(verdict, cap, "%s: wrong results: max error %.3g in %s (tolerance %.0e)", c->family, cr->max_err,
                 cr->worst, CHECK_TOLERANCE);
    }
}

/* Run one family's child; fill cr and a one-line verdict (empty: passed). */
static void check_family(const char *spec, const check_case *c, int timeout_s, child_report *cr, char *verdict,
                         size_t cap)
{
    int fds[2], status = 0, hung = 0;
    memset(cr, 0, sizeof *cr);
    snprintf(cr->phase, sizeof cr->phase, "starting");
    verdict[0] = '\0';
    if (pipe(fds) != 0) {
        snprintf(verdict, cap, "%s: cannot make a pipe: %s", c->family, strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(verdict, cap, "%s: cannot fork: %s", c->family, strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        check_child(fds[1], spec, c);
    }
    close(fds[1]);
    wait_child(pid, fds[0], timeout_s, cr, &status, &hung);
    write_verdict(c, timeout_s, cr, status, hung, verdict, cap);
}

static int in_list(const char *list, const char *family)
{
    size_t len = strlen(family);
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && !strncmp(p, family, len))
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* Every name in the comma-separated list (--only, and the test hooks'
 * variables) is a family of info_cases: 1, or 0 after saying which is not and
 * listing the families. An empty list or name is not one either. */
int info_families_known(const char *what, const char *list)
{
    for (const char *p = list;;) {
        size_t n = strcspn(p, ",");
        int known = 0;
        for (int i = 0; i < INFO_N_CASES && n; i++)
            known |= strlen(info_cases[i].family) == n && !strncmp(p, info_cases[i].family, n);
        if (!known) {
            fprintf(stderr, "teeny-info: %s: \"%.*s\" is not a kernel family; the families are", what, (int)n, p);
            for (int i = 0; i < INFO_N_CASES; i++)
                fprintf(stderr, "%s %s", i ? "," : "", info_cases[i].family);
            fprintf(stderr, "\n");
            return 0;
        }
        if (!p[n])
            return 1;
        p += n + 1;
    }
}

int info_check_device(const char *spec, int timeout_s, const char *only)
{
    child_report reports[INFO_N_CASES];
    char verdicts[INFO_N_CASES][600];
    int ran[INFO_N_CASES] = {0}, failures = 0, no_context = 0;
    const char *device = NULL;

    printf("teenycl %s: checking every kernel family on %s (cold builds, %d s limit each)\n",
           teeny_version_string(), spec && *spec ? spec : "the default device", timeout_s);
    for (int i = 0; i < INFO_N_CASES; i++) {
        if (only && !in_list(only, info_cases[i].family))
            continue;
        check_family(spec, &info_cases[i], timeout_s, &reports[i], verdicts[i], sizeof verdicts[i]);
        ran[i] = 1;
        if (!device && reports[i].device[0])
            device = reports[i].device;
        if (!reports[i].device[0] && !strcmp(reports[i].phase, "context")) {
            no_context = 1; /* every other child would fail the same way */
            break;
        }
    }
    printf("device: %s\n\n", device ? device : "(no child got as far as a context)");
    printf("%-12s %9s %7s %10s  %-6s %s\n", "family", "build ms", "run ms", "max error", "result", "case");
    for (int i = 0; i < INFO_N_CASES; i++) {
        char ms[32] = "-", run[32] = "-", err[32] = "-";
        if (!ran[i])
            continue;
        if (reports[i].have_build)
            snprintf(ms, sizeof ms, "%.0f", reports[i].build_ms);
        if (reports[i].have_run)
            snprintf(run, sizeof run, "%.0f", reports[i].run_ms);
        if (reports[i].have_result)
            snprintf(err, sizeof err, "%.1e", reports[i].max_err);
        printf("%-12s %9s %7s %10s  %-6s %s\n", info_cases[i].family, ms, run, err, verdicts[i][0] ? "FAIL" : "pass",
               info_cases[i].what);
        failures += verdicts[i][0] != '\0';
    }
    if (failures) {
        printf("\n");
        for (int i = 0; i < INFO_N_CASES; i++) {
            if (!ran[i] || !verdicts[i][0])
                continue;
            printf("%s\n", verdicts[i]);
            for (int l = 0; l < reports[i].n_log; l++)
                printf("    %s\n", reports[i].log[l]);
        }
        if (no_context)
            printf("(the other families were not run: there is no context to run them in)\n");
        printf("\n%d of the families above failed on this device.\n", failures);
    } else {
        printf("\nevery family built and matched the host reference.\n");
    }
    return failures ? 1 : 0;
}
