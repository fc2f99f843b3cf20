/*
 * env.c -- the environment, read strictly: teeny__env_int (a number
 * through util.c's one parser, TEENY_ERR_ARG naming the variable, value
 * and range) and teeny__env_check, run at context creation, which refuses
 * an empty value, a word not listed or an over-long path for every word-
 * or path-valued variable the library reads (TUNING.md, "Environment"). Its
 * own file because it reports errors (status.c) while util.c, which
 * status.c calls, must not.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

teeny_status teeny__env_int(const teeny_ctx *ctx, const char *name, long long lo, long long hi, long long def,
                            long long *out)
{
    const char *s = getenv(name), *why;
    *out = def;
    if (!s)
        return TEENY_OK;
    if (!teeny__parse_int(s, strlen(s), lo, hi, out, &why)) {
        *out = def;
        return teeny__error(ctx, TEENY_ERR_ARG, "%s=\"%.64s\" %s; it takes a decimal integer in %lld..%lld, or unset",
                            name, s, why, lo, hi);
    }
    return TEENY_OK;
}

/* The variables the library reads that take words or paths, checked
 * whenever a context is created (TUNING.md, "Environment"): set means set, so
 * an empty value or a word not listed is TEENY_ERR_ARG, never a silent
 * default. TEENY_DEVICE is checked with the device spec (device.c),
 * TEENY_TUNING (a row of src/tune/profiles.def) and the numeric
 * TEENY_ATTN_* (through teeny__env_int) by the tune layer (tune.c). A new
 * variable gets a row here or a check where it is read. */
#define ENV_PATH_MAX 4000 /* what build.c and cache.c's path buffers hold, with a file name */
static const struct {
    const char *name;
    const char *words; /* "a|b|c"; NULL: a path */
    int nocase;        /* words compared ignoring case (as their reader does) */
} ENV_VARS[] = {
    {"TEENY_NO_CACHE", "0|1", 0},
    {"TEENY_PROFILE", "0|1|2", 0},
    {"TEENY_LOG", "debug|info|warn|error|none", 1},
    {"TEENY_CACHE_DIR", NULL, 0},
    {"TEENY_KERNEL_DIR", NULL, 0},
};

static int is_word(const char *s, const char *words, int nocase)
{
    size_t n = strlen(s);
    for (const char *w = words; *w;) {
        size_t len = strcspn(w, "|");
        if (len == n && (nocase ? !strncasecmp(w, s, n) : !strncmp(w, s, n)))
            return 1;
        w += len + (w[len] == '|');
    }
    return 0;
}

teeny_status teeny__env_check(void)
{
    for (size_t i = 0; i < sizeof ENV_VARS / sizeof ENV_VARS[0]; i++) {
        const char *name = ENV_VARS[i].name, *words = ENV_VARS[i].words, *s = getenv(name);
        char list[64];
        if (!s)
            continue;
        teeny__strlcpy(list, words ? words : "", sizeof list);
        for (char *c = list; *c; c++)
            *c = *c == '|' ? '/' : *c;
        if (!*s)
            return teeny__error(NULL, TEENY_ERR_ARG, "%s is set but empty; unset it%s%s", name,
                                words ? " or set it to one of " : " or name a directory", list);
        if (words && !is_word(s, words, ENV_VARS[i].nocase))
            return teeny__error(NULL, TEENY_ERR_ARG, "%s=\"%.64s\" is not one of %s (README, \"Environment\")", name,
                                s, list);
        if (!words && strlen(s) > ENV_PATH_MAX)
            return teeny__error(NULL, TEENY_ERR_ARG, "%s is %zu bytes long; paths up to %d bytes are supported", name,
                                strlen(s), ENV_PATH_MAX);
    }
    return TEENY_OK;
}
