/*
 * fuzz_lib.c -- seed files and loader calls shared by the libFuzzer targets
 * and the `fuzz` check suite (see fuzz_lib.h). Seeds cover what each writer
 * produces plus hand-made variants the writers never emit (other npy
 * versions and dtypes, gzip IDX, several tensors and dtypes per
 * safetensors file), so mutations start from every branch of each parser.
 * The checkpoint target loads into a small fixed graph: input [B, 4] ->
 * linear "fc" (3, bias) -> batch norm "bn".
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "fuzz_lib.h"

static const char *names[FUZZ_N_FORMATS] = {"safetensors", "npy", "idx", "checkpoint"};

const char *fuzz_format_name(fuzz_format f)
{
    return f >= 0 && f < FUZZ_N_FORMATS ? names[f] : "?";
}

/* ---- seeds ---- */

static int put(const char *dir, const char *name, const void *data, size_t len)
{
    char path[1024];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "fuzz seeds: cannot write %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f) == 0 ? 0 : -1;
}

static int put_gz(const char *dir, const char *name, const void *data, size_t len)
{
    char path[1024];
    gzFile g;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    g = gzopen(path, "wb");
    if (!g || gzwrite(g, data, (unsigned)len) != (int)len) {
        if (g)
            gzclose(g);
        return -1;
    }
    return gzclose(g) == Z_OK ? 0 : -1;
}

static teeny_tensor *tensor(teeny_ctx *ctx, int ndim, const int64_t *shape, float scale)
{
    teeny_tensor *t = NULL;
    int64_t n = 1;
    float *x;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    if (teeny_tensor_create(ctx, ndim, shape, &t) != TEENY_OK)
        return NULL;
    x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; x && i < n; i++)
        x[i] = scale * (float)(i % 7) - 1.5f;
    if (!x || teeny_tensor_write(t, x, (size_t)n) != TEENY_OK) {
        teeny_tensor_destroy(t);
        t = NULL;
    }
    free(x);
    return t;
}

static int seeds_safetensors(teeny_ctx *ctx, const char *dir)
{
    static const int64_t s2[2] = {3, 4}, s1[1] = {5}, s3[3] = {2, 1, 3};
    int64_t count = 42, v[3] = {-1, 7, 1LL << 40};
    teeny_tensor *a = tensor(ctx, 2, s2, 0.5f), *b = tensor(ctx, 1, s1, 2.0f), *c = tensor(ctx, 3, s3, 1.0f);
    teeny_st_writer *w = NULL;
    char path[1024];
    int n = 0, ok = a && b && c;
    /* one tensor; several with i64 and metadata; an empty file's worth */
    for (int k = 0; ok && k < 3; k++) {
        ok = teeny_st_writer_create(&w) == TEENY_OK;
        if (ok && k >= 0)
            ok = teeny_st_add_tensor(w, "w", a) == TEENY_OK;
        if (ok && k >= 1)
            ok = teeny_st_add_tensor(w, "layer.bias", b) == TEENY_OK &&
                 teeny_st_add_i64(w, "bn.num_batches_tracked", 0, NULL, &count) == TEENY_OK &&
                 teeny_st_add_i64(w, "v", 1, (const int64_t[]){3}, v) == TEENY_OK &&
                 teeny_st_add_metadata(w, "epoch", "3") == TEENY_OK;
        if (ok && k >= 2)
            ok = teeny_st_add_tensor(w, "c", c) == TEENY_OK && teeny_st_add_metadata(w, "note", "\"q\" \\ \xc3\xa9") == TEENY_OK;
        snprintf(path, sizeof path, "%s/seed-%d.safetensors", dir, k);
        ok = ok && teeny_st_write(w, path) == TEENY_OK;
        teeny_st_writer_destroy(w);
        w = NULL;
        n += ok;
    }
    { /* what Python's safetensors writes: no checksums, unpadded header */
        static const char h[] = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                "\"__metadata__\":{\"format\":\"pt\"}}";
        unsigned char buf[8 + sizeof h - 1 + 8] = {0};
        buf[0] = (unsigned char)(sizeof h - 1);
        memcpy(buf + 8, h, sizeof h - 1);
        ok = ok && put(dir, "python.safetensors", buf, sizeof buf) == 0;
        n += ok;
    }
    { /* strings as text: names with multi-byte UTF-8, raw and escaped, and
       * a dtype spelled with escapes ("F32"), so that mutations reach the
       * checks for NUL characters, invalid UTF-8 and empty names */
        static const char h[] = "{\"\\u00e9t\\u00e9\":{\"dtype\":\"F\\u0033\\u0032\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                "\"w\xc3\xa9\xf0\x9f\x98\x80\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                                "\"__metadata__\":{\"k\\u00e9\":\"v\xc3\xa9\"}}";
        unsigned char buf[8 + sizeof h - 1 + 12] = {(unsigned char)(sizeof h - 1)};
        memcpy(buf + 8, h, sizeof h - 1);
        ok = ok && put(dir, "text.safetensors", buf, sizeof buf) == 0;
        n += ok;
    }
    teeny_tensor_destroy(a);
    teeny_tensor_destroy(b);
    teeny_tensor_destroy(c);
    return ok ? n : -1;
}

/* An .npy file of the given version and header dict; its data_bytes are
 * data, or i * 37 (mod 256) at byte i when data is NULL. */
static int npy_raw(const char *dir, const char *name, int major, const char *dict, const void *data,
                   size_t data_bytes)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict), total = (pre + dl + 1 + 63) / 64 * 64, hlen = total - pre;
    unsigned char *b = calloc(1, total + data_bytes);
    int r;
    if (!b)
        return -1;
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[8] = (unsigned char)hlen;
    b[9] = (unsigned char)(hlen >> 8);
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', hlen - dl - 1);
    b[total - 1] = '\n';
    for (size_t i = 0; i < data_bytes; i++)
        b[total + i] = data ? ((const unsigned char *)data)[i] : (unsigned char)(i * 37);
    r = put(dir, name, b, total + data_bytes);
    free(b);
    return r;
}

static int seeds_npy(teeny_ctx *ctx, const char *dir)
{
    static const int64_t s2[2] = {2, 3}, s4[4] = {1, 2, 1, 2};
    teeny_tensor *a = tensor(ctx, 2, s2, 1.0f), *b = tensor(ctx, 4, s4, 3.0f), *i = NULL;
    char path[1024];
    int ok = a && b && teeny_tensor_create_i32(ctx, 1, (const int64_t[]){3}, &i) == TEENY_OK &&
             teeny_tensor_write_i32(i, (const int32_t[]){-5, 0, 9}, 3) == TEENY_OK;
    snprintf(path, sizeof path, "%s/f32-2d.npy", dir);
    ok = ok && teeny_npy_save(a, path) == TEENY_OK;
    snprintf(path, sizeof path, "%s/f32-4d.npy", dir);
    ok = ok && teeny_npy_save(b, path) == TEENY_OK;
    snprintf(path, sizeof path, "%s/i32-1d.npy", dir);
    ok = ok && teeny_npy_save(i, path) == TEENY_OK;
    ok = ok && npy_raw(dir, "v2-scalar.npy", 2, "{\"shape\": (), \"fortran_order\": False, \"descr\": \"<i4\"}", NULL, 4) == 0;
    ok = ok && npy_raw(dir, "v3.npy", 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", NULL, 12) == 0;
    static const unsigned char i64[32] = {7, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 127, 0, 0, 0, 0,
                                          0, 0, 0, 128, 255, 255, 255, 255, 254, 255, 255, 255, 255, 255, 255, 255};
    static const unsigned char flags[3] = {1, 0, 1};
    ok = ok && npy_raw(dir, "i64-2d.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }", i64,
                       sizeof i64) == 0;
    ok = ok && npy_raw(dir, "bool-1d.npy", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", flags,
                       sizeof flags) == 0;
    teeny_tensor_destroy(a);
    teeny_tensor_destroy(b);
    teeny_tensor_destroy(i);
    return ok ? 7 : -1;
}

static int seeds_idx(const char *dir)
{
    unsigned char images[4 + 12 + 2 * 3 * 4], labels[8 + 6] = {0, 0, 8, 1, 0, 0, 0, 6, 0, 1, 9, 3, 2, 7};
    unsigned char four[4 + 16 + 2] = {0, 0, 8, 4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 5, 6};
    static const unsigned char ih[16] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4};
    memcpy(images, ih, 16);
    for (int i = 16; i < (int)sizeof images; i++)
        images[i] = (unsigned char)(i * 11);
    if (put(dir, "images.idx", images, sizeof images) || put(dir, "labels.idx", labels, sizeof labels) ||
        put(dir, "rank4.idx", four, sizeof four) || put_gz(dir, "images.idx.gz", images, sizeof images) ||
        put_gz(dir, "labels.idx.gz", labels, sizeof labels))
        return -1;
    return 5;
}

/* The fixed graph the checkpoint target loads into. */
static teeny_status checkpoint_graph(teeny_ctx *ctx, teeny_graph **out)
{
    static const int64_t in_shape[2] = {-1, 4};
    teeny_node x, fc, bn;
    teeny_status st = teeny_graph_create(ctx, 7, out);
    if (st == TEENY_OK)
        st = teeny_graph_input(*out, "x", 2, in_shape, &x);
    if (st == TEENY_OK)
        st = teeny_graph_linear(*out, "fc", x, 3, 1, &fc);
    if (st == TEENY_OK)
        st = teeny_graph_batchnorm(*out, "bn", fc, 0.1f, 1e-5f, &bn);
    if (st != TEENY_OK) {
        teeny_graph_destroy(*out);
        *out = NULL;
    }
    return st;
}

static int seeds_checkpoint(teeny_ctx *ctx, const char *dir)
{
    teeny_graph *g = NULL;
    char path[1024];
    static const char *keys[2] = {"epoch", "arch"}, *values[2] = {"12", "fc-bn"};
    int ok = checkpoint_graph(ctx, &g) == TEENY_OK;
    snprintf(path, sizeof path, "%s/graph.safetensors", dir);
    ok = ok && teeny_graph_save(g, NULL, path, 2, keys, values) == TEENY_OK;
    snprintf(path, sizeof path, "%s/graph-nometa.safetensors", dir);
    ok = ok && teeny_graph_save(g, NULL, path, 0, NULL, NULL) == TEENY_OK;
    teeny_graph_destroy(g);
    return ok ? 2 : -1;
}

int fuzz_make_seeds(teeny_ctx *ctx, fuzz_format f, const char *dir)
{
    int n = -1;
    switch (f) {
    case FUZZ_SAFETENSORS: n = seeds_safetensors(ctx, dir); break;
    case FUZZ_NPY: n = seeds_npy(ctx, dir); break;
    case FUZZ_IDX: n = seeds_idx(dir); break;
    case FUZZ_CHECKPOINT: n = seeds_checkpoint(ctx, dir); break;
    default: break;
    }
    if (n < 0)
        fprintf(stderr, "fuzz seeds (%s): %s\n", fuzz_format_name(f), teeny_last_error(NULL)[0] ? teeny_last_error(NULL) : teeny_last_error(ctx));
    return n;
}

/* ---- loading ---- */

static char tmp_file[256];

void fuzz_cleanup(void)
{
    if (tmp_file[0])
        unlink(tmp_file);
}

static const char *write_tmp(const unsigned char *data, size_t size)
{
    FILE *f;
    if (!tmp_file[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmp_file, sizeof tmp_file, "%s/teeny-fuzz-%ld", base && *base ? base : "/tmp", (long)getpid());
    }
    f = fopen(tmp_file, "wb");
    if (!f)
        return NULL;
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return NULL;
    }
    return fclose(f) == 0 ? tmp_file : NULL;
}

/* Open a safetensors file and read every tensor it holds. */
static teeny_status load_safetensors(teeny_ctx *ctx, const char *path, const char **msg)
{
    teeny_st_file *f = NULL;
    teeny_status st = teeny_st_open(path, &f);
    const teeny_ctx *err_ctx = NULL; /* where the failing call left its message */
    for (int i = 0; st == TEENY_OK && i < teeny_st_count(f); i++) {
        const char *name = teeny_st_name(f, i);
        int is_i64 = 0, ndim = 0;
        int64_t shape[TEENY_ST_MAX_DIMS], n = 1;
        st = teeny_st_info(f, name, &is_i64, &ndim, shape);
        for (int d = 0; st == TEENY_OK && d < ndim; d++)
            n *= shape[d];
        if (st != TEENY_OK || n > (1 << 22) || n == 0)
            continue;
        if (is_i64) {
            int64_t *v = malloc((size_t)n * sizeof *v);
            if (v)
                st = teeny_st_read_i64(f, name, v, (size_t)n);
            free(v);
        } else if (ctx && ndim <= 5) {
            teeny_tensor *t = NULL;
            if (teeny_tensor_create(ctx, ndim ? ndim : 1, ndim ? shape : (const int64_t[]){1}, &t) == TEENY_OK) {
                st = teeny_st_read_f32(f, name, t);
                err_ctx = ctx;
            }
            teeny_tensor_destroy(t);
        }
    }
    (void)teeny_st_metadata(f, "epoch");
    teeny_st_close(f);
    *msg = teeny_last_error(err_ctx);
    return st;
}

static teeny_status load_npy(teeny_ctx *ctx, const char *path, const char **msg)
{
    teeny_tensor *t = NULL;
    teeny_npy_info info;
    int read_ok = 0;
    /* the host reader first (the load's message stays the last): the
     * header, then the data into a buffer of its size */
    if (teeny_npy_read(ctx, path, &info, NULL, 0) == TEENY_OK) {
        void *data = malloc(info.bytes + 1);
        read_ok = data && teeny_npy_read(ctx, path, &info, data, info.bytes) == TEENY_OK;
        free(data);
    }
    teeny_status st = teeny_npy_load(ctx, path, &t);
    *msg = teeny_last_error(ctx);
    if (st == TEENY_OK && !t)
        st = TEENY_ERR_STATE, *msg = "npy load returned OK and no tensor";
    else if (read_ok != (st == TEENY_OK) && st != TEENY_ERR_RANGE)
        st = TEENY_ERR_STATE, *msg = "npy read and npy load disagree on the file";
    teeny_tensor_destroy(t);
    return st;
}

static teeny_status load_idx(const char *path, const char **msg)
{
    teeny_idx *idx = NULL;
    teeny_status st = teeny_idx_load(path, &idx);
    *msg = teeny_last_error(NULL);
    if (st == TEENY_OK) {
        int64_t n = 1;
        unsigned sum = 0;
        const uint8_t *d = teeny_idx_data(idx);
        for (int i = 0; i < teeny_idx_ndim(idx); i++)
            n *= teeny_idx_dim(idx, i);
        for (int64_t i = 0; i < n; i++) /* every value is readable */
            sum += d[i];
        (void)sum;
        if (teeny_idx_check_labels(idx, 10) != TEENY_OK && !teeny_last_error(NULL)[0])
            st = TEENY_ERR_STATE, *msg = "";
    }
    teeny_idx_free(idx);
    return st;
}

static teeny_status load_checkpoint(teeny_ctx *ctx, const char *path, const char **msg)
{
    static teeny_graph *g; /* built once per process: building costs kernel launches */
    static teeny_ctx *g_ctx;
    char value[8];
    teeny_status st = teeny_checkpoint_metadata(path, "epoch", value, sizeof value);
    if (st != TEENY_OK && st != TEENY_ERR_FORMAT && st != TEENY_ERR_RANGE) {
        *msg = teeny_last_error(NULL);
        return st;
    }
    if (st != TEENY_OK && !teeny_last_error(NULL)[0]) {
        *msg = "";
        return st;
    }
    if (g && g_ctx != ctx) {
        teeny_graph_destroy(g);
        g = NULL;
    }
    if (!g && checkpoint_graph(ctx, &g) != TEENY_OK) {
        *msg = teeny_last_error(ctx);
        return TEENY_ERR_STATE;
    }
    g_ctx = ctx;
    st = teeny_graph_load(g, NULL, path);
    *msg = teeny_last_error(ctx);
    return st;
}

teeny_status fuzz_load(teeny_ctx *ctx, fuzz_format f, const unsigned char *data, size_t size, const char **msg)
{
    const char *path = write_tmp(data, size);
    teeny_status st;
    if (!path) {
        *msg = "fuzz: cannot write the temp file";
        return TEENY_ERR_IO;
    }
    switch (f) {
    case FUZZ_SAFETENSORS: st = load_safetensors(ctx, path, msg); break;
    case FUZZ_NPY: st = load_npy(ctx, path, msg); break;
    case FUZZ_IDX: st = load_idx(path, msg); break;
    case FUZZ_CHECKPOINT: st = load_checkpoint(ctx, path, msg); break;
    default: *msg = "fuzz: unknown format"; st = TEENY_ERR_ARG; break;
    }
    if (!*msg)
        *msg = "";
    return st;
}
