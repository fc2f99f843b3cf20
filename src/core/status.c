/*
 * status.c -- status names, per-context error messages, the log sink and
 * the library version. The log sink is safe to replace from any thread.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static _Thread_local char thread_err[4096];

unsigned teeny_version(void)
{
    return TEENY_VERSION_HEX;
}

#define TEENY__STR2(x) #x
#define TEENY__STR(x) TEENY__STR2(x)
const char *teeny_version_string(void)
{
    return TEENY__STR(TEENY_VERSION_MAJOR) "." TEENY__STR(TEENY_VERSION_MINOR) "." TEENY__STR(TEENY_VERSION_PATCH);
}

const char *teeny_status_name(teeny_status st)
{
    switch (st) {
#define TEENY__STATUS_NAME(name, value, text) case TEENY_##name: return "TEENY_" #name;
    TEENY_STATUS_MAP(TEENY__STATUS_NAME)
#undef TEENY__STATUS_NAME
    default: return "TEENY_UNKNOWN";
    }
}

const char *teeny_status_str(teeny_status st)
{
    switch (st) {
#define TEENY__STATUS_TEXT(name, value, text) case TEENY_##name: return text;
    TEENY_STATUS_MAP(TEENY__STATUS_TEXT)
#undef TEENY__STATUS_TEXT
    default: return "unknown status";
    }
}

static char *err_buf(const teeny_ctx *ctx, size_t *cap)
{
    if (ctx) {
        *cap = sizeof ctx->err;
        return ((teeny_ctx *)ctx)->err;
    }
    *cap = sizeof thread_err;
    return thread_err;
}

const char *teeny_last_error(const teeny_ctx *ctx)
{
    return ctx ? ctx->err : thread_err;
}

void teeny__clear_error(const teeny_ctx *ctx)
{
    size_t cap;
    err_buf(ctx, &cap)[0] = '\0';
}

teeny_status teeny__error(const teeny_ctx *ctx, teeny_status st, const char *fmt, ...)
{
    /* Format into a scratch buffer first: callers may pass the current
     * message as an argument (to prefix it). */
    static _Thread_local char tmp[TEENY_ERR_CAP];
    size_t cap;
    char *buf = err_buf(ctx, &cap);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    teeny__strlcpy(buf, tmp, cap);
    teeny__log(TEENY_LOG_DEBUG, "%s: %s", teeny_status_name(st), buf);
    return st;
}

void teeny__error_append(const teeny_ctx *ctx, const char *text)
{
    size_t cap;
    char *buf = err_buf(ctx, &cap);
    size_t len = strlen(buf);
    if (len + 1 < cap)
        snprintf(buf + len, cap - len, "%s", text);
}

teeny_status teeny__cl_error(const teeny_ctx *ctx, cl_int err, const char *call)
{
    return teeny__error(ctx, TEENY_ERR_OPENCL, "%s failed: %s (%d)%s%s", call,
                        teeny__cl_error_name(err), (int)err,
                        ctx ? " on " : "", ctx ? ctx->info.device_name : "");
}

/* ---- logging ---- */

/* The sink is a (function, user data) pair that any thread may replace
 * while others log: a spin lock (held only to copy the two pointers, never
 * while a sink runs, so a sink may itself log or call teeny_log_set) keeps
 * each message's pair consistent. C11 atomics: no threads library to link. */
static teeny_log_fn log_fn;
static void *log_user;
static atomic_flag log_lock = ATOMIC_FLAG_INIT;
static atomic_int log_custom;   /* a sink is set: the fast path reads only this */
static atomic_int log_level = -1; /* TEENY_LOG, parsed once */

static void sink_lock(void)
{
    while (atomic_flag_test_and_set_explicit(&log_lock, memory_order_acquire))
        ;
}

static void sink_unlock(void)
{
    atomic_flag_clear_explicit(&log_lock, memory_order_release);
}

static teeny_log_level env_level(void)
{
    int cached = atomic_load(&log_level);
    if (cached < 0) {
        /* Threads that race here parse the same variable to the same value. */
        const char *s = getenv("TEENY_LOG");
        cached = TEENY_LOG_WARN;
        if (s && !strcasecmp(s, "debug")) cached = TEENY_LOG_DEBUG;
        else if (s && !strcasecmp(s, "info")) cached = TEENY_LOG_INFO;
        else if (s && !strcasecmp(s, "warn")) cached = TEENY_LOG_WARN;
        else if (s && !strcasecmp(s, "error")) cached = TEENY_LOG_ERROR;
        else if (s && !strcasecmp(s, "none")) cached = TEENY_LOG_NONE;
        atomic_store(&log_level, cached);
    }
    return (teeny_log_level)cached;
}

void teeny_log_set(teeny_log_fn fn, void *user_data)
{
    sink_lock();
    log_fn = fn;
    log_user = fn ? user_data : NULL;
    atomic_store(&log_custom, fn != NULL);
    sink_unlock();
}

void teeny__log(teeny_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    char msg[1024];
    va_list ap;
    teeny_log_fn fn;
    void *user;
    if (!atomic_load(&log_custom) && level < env_level())
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sink_lock();
    fn = log_fn;
    user = log_user;
    sink_unlock();
    if (fn)
        fn(level, msg, user);
    else if (level >= env_level()) /* the sink was reset meanwhile */
        fprintf(stderr, "teenycl %s: %s\n", names[level < 4 ? level : 3], msg);
}
