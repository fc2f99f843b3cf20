/*
 * test_fuzz.c -- the file loaders against damaged input, without libFuzzer:
 * each loader's seed files (tests/fuzz/fuzz_lib.c, made by the library's
 * writers) load, and seeded structured mutations of them (byte flips,
 * truncations, corrupted size fields, numbers in the header text replaced
 * by extremes, huge dimensions, spliced and appended bytes) each return a
 * status -- OK or an error with a non-empty message -- and never crash.
 * Same seed, same mutations: a failure prints the format, seed file and
 * mutation index to replay. TEENY_FUZZ_CORPUS=<dir> also replays every
 * file of <dir>/<format>/ (e.g. build-fuzz/corpus after `make fuzz`).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz/fuzz_lib.h"
#include "harness.h"

#define MAX_SEEDS 16

typedef struct {
    char name[256];
    unsigned char *data;
    size_t len;
} seed_file;

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long n;
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = th_malloc((size_t)n + 1);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Read (and delete) every file of dir; returns how many. */
static int load_dir(const char *dir, seed_file *seeds, int cap, int remove_after)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    char path[1024];
    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL && n < cap) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        snprintf(seeds[n].name, sizeof seeds[n].name, "%s", e->d_name);
        seeds[n].data = slurp(path, &seeds[n].len);
        if (remove_after)
            unlink(path);
        n++;
    }
    closedir(d);
    return n;
}

/* Load once and check the contract: a known status, a message on error. */
static teeny_status check_load(fuzz_format f, const unsigned char *data, size_t len, const char *what, int k)
{
    const char *msg = NULL;
    teeny_status st = fuzz_load(th_ctx(), f, data, len, &msg);
    ck_assert_msg(strcmp(teeny_status_name(st), "TEENY_UNKNOWN") != 0, "%s %s mutation %d: status %d is unknown",
                  fuzz_format_name(f), what, k, (int)st);
    ck_assert_msg(st == TEENY_OK || (msg && msg[0]), "%s %s mutation %d: %s with an empty message",
                  fuzz_format_name(f), what, k, teeny_status_name(st));
    return st;
}

/* The first occurrence of key in buf, or NULL. */
static unsigned char *find_text(unsigned char *buf, size_t len, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl <= len; i++)
        if (!memcmp(buf + i, key, kl))
            return buf + i;
    return NULL;
}

static const char *const EXTREMES[] = {"0", "1", "-1", "4294967296", "18446744073709551615", "9007199254740993",
                                       "1e300", "2147483647", "99999999999999999999", "3.5", ""};

/* Replace the digit run at or after byte at with text. */
static size_t replace_number(unsigned char *buf, size_t len, size_t cap, size_t at, const char *text)
{
    size_t b = at, e, tl = strlen(text);
    while (b < len && !(buf[b] >= '0' && buf[b] <= '9'))
        b++;
    if (b >= len)
        return len;
    for (e = b; e < len && buf[e] >= '0' && buf[e] <= '9'; e++)
        ;
    if (len - (e - b) + tl > cap)
        return len;
    memmove(buf + b + tl, buf + e, len - e);
    memcpy(buf + b, text, tl);
    return len - (e - b) + tl;
}

/* Mutation k of seed s into out (cap bytes); returns the new length. */
static size_t mutate(fuzz_format f, const seed_file *s, th_rng *r, int k, unsigned char *out, size_t cap)
{
    size_t len = s->len;
    memcpy(out, s->data, len);
    switch (k % 7) {
    case 0: /* flip 1..4 bytes */
        for (int i = th_int(r, 1, 4); i > 0 && len; i--)
            out[th_next(r) % len] ^= (unsigned char)th_int(r, 1, 255);
        break;
    case 1: /* truncate */
        len = len ? th_next(r) % len : 0;
        break;
    case 2: /* a size field: safetensors' u64 header length, npy's header
             * length, an IDX rank or dimension */
        if (f == FUZZ_NPY && len > 11) {
            out[8 + th_int(r, 0, 1)] = (unsigned char)th_next(r);
        } else if (f == FUZZ_IDX && len > 8) {
            int at = th_int(r, 3, 8);
            out[at] = at == 3 ? (unsigned char)th_int(r, 0, 6) : (unsigned char)th_next(r);
        } else if (len > 8) {
            static const uint64_t sizes[] = {0, 1, 2, 7, 0xffffffffULL, 100000001ULL, UINT64_MAX, 1ULL << 63};
            uint64_t v = th_int(r, 0, 1) ? sizes[th_next(r) % 8] : (uint64_t)th_int(r, 0, (int)len + 8);
            for (int b = 0; b < 8; b++)
                out[b] = (unsigned char)(v >> (8 * b));
        }
        break;
    case 3: /* a number in the header text (shape, offsets, lengths) */
        len = replace_number(out, len, cap, len ? th_next(r) % len : 0, EXTREMES[th_next(r) % 11]);
        break;
    case 4: /* huge dimensions */
        if (f == FUZZ_IDX && len >= 8) {
            int ndim = out[3] >= 1 && out[3] <= 4 ? out[3] : 1;
            for (int d = 0; d < ndim && 7 + 4 * d < (int)len; d++) {
                uint32_t v = th_int(r, 0, 1) ? 0xffffffffu : 0x7fffffffu >> th_int(r, 0, 20);
                for (int b = 0; b < 4; b++)
                    out[4 + 4 * d + b] = (unsigned char)(v >> (24 - 8 * b));
            }
        } else {
            const char *key = f == FUZZ_NPY ? "shape" : th_int(r, 0, 1) ? "shape" : "data_offsets";
            unsigned char *at = find_text(out, len, key);
            if (at)
                len = replace_number(out, len, cap, (size_t)(at - out), EXTREMES[th_int(r, 3, 8)]);
        }
        break;
    case 5: { /* splice: copy a chunk over another place */
        size_t a = len ? th_next(r) % len : 0, b = len ? th_next(r) % len : 0, n = len ? th_next(r) % (len / 4 + 1) : 0;
        if (a + n <= len && b + n <= len)
            memmove(out + b, out + a, n);
        break;
    }
    default: /* append bytes */
        for (int i = th_int(r, 1, 64); i > 0 && len < cap; i--)
            out[len++] = (unsigned char)th_next(r);
        break;
    }
    return len;
}

START_TEST(test_fuzz_loaders)
{
    fuzz_format f = (fuzz_format)_i;
    char dir[256];
    seed_file seeds[MAX_SEEDS];
    int n_seeds, per_seed = th_full() ? 2000 : th_small() ? 100 : 250, total = 0, errors = 0;
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/teeny-fuzz-seeds-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_msg(fuzz_make_seeds(th_ctx(), f, dir) > 0, "%s seeds: %s", fuzz_format_name(f),
                  teeny_last_error(NULL));
    n_seeds = load_dir(dir, seeds, MAX_SEEDS, 1);
    rmdir(dir);
    ck_assert_int_gt(n_seeds, 0);
    for (int s = 0; s < n_seeds; s++) {
        size_t cap = seeds[s].len + 256;
        unsigned char *buf = th_malloc(cap);
        th_rng r = th_rng_make(0x5eed0000u + 977u * (unsigned)s + 31u * (unsigned)f);
        TH_OK(NULL, check_load(f, seeds[s].data, seeds[s].len, seeds[s].name, -1));
        for (int k = 0; k < per_seed; k++) {
            size_t len = mutate(f, &seeds[s], &r, k, buf, cap);
            errors += check_load(f, buf, len, seeds[s].name, k) != TEENY_OK;
            total++;
        }
        free(buf);
        free(seeds[s].data);
    }
    /* a libFuzzer corpus, when given */
    const char *corpus = getenv("TEENY_FUZZ_CORPUS");
    if (corpus && *corpus) {
        char sub[512];
        seed_file *files = th_malloc(sizeof *files * 4096);
        snprintf(sub, sizeof sub, "%s/%s", corpus, fuzz_format_name(f));
        int n = load_dir(sub, files, 4096, 0);
        for (int i = 0; i < n; i++) {
            check_load(f, files[i].data, files[i].len, files[i].name, -1);
            free(files[i].data);
        }
        free(files);
        total += n;
    }
    fuzz_cleanup();
    /* the mutations must reach the error paths, and not only them */
    ck_assert_msg(errors > total / 4 && errors < total, "%s: %d of %d mutations failed to load",
                  fuzz_format_name(f), errors, total);
}
END_TEST

Suite *suite_fuzz(void)
{
    Suite *s = suite_create("fuzz");
    TCase *tc = tcase_create("loaders");
    tcase_add_loop_test(tc, test_fuzz_loaders, 0, FUZZ_N_FORMATS);
    suite_add_tcase(s, tc);
    return s;
}
