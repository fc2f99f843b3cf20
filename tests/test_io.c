/*
 * test_io.c -- file formats: .npy round trips and malformed headers;
 * safetensors round trips, the on-disk layout (parsed independently with
 * cJSON), files written by other tools, every kind of corruption
 * (truncation at every length, a flipped bit at every header byte and in
 * the data, bad offsets, shapes and dtypes) and crash-safe writes; IDX
 * loading of the real Fashion-MNIST files (when installed) and of
 * malformed synthetic files, plain and gzip.
 */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "harness.h"

/* ---- scratch directory and file helpers ---- */

static char tmp_dir[256];

static void dir_setup(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/teeny-io-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_msg(mkdtemp(tmp_dir) != NULL, "mkdtemp %s failed", tmp_dir);
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char sub[512];
    if (!d) {
        unlink(path);
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        chmod(sub, 0700);
        remove_tree(sub);
    }
    closedir(d);
    rmdir(path);
}

static void dir_teardown(void)
{
    if (tmp_dir[0]) {
        chmod(tmp_dir, 0700);
        remove_tree(tmp_dir);
    }
}

static const char *tmp_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", tmp_dir, name);
    return buf;
}

static unsigned char *file_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = th_malloc((size_t)n + 1);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

static void file_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_int_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Names in tmp_dir containing text (temp files left behind). */
static int dir_count(const char *dir, const char *text)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, text) != NULL;
    closedir(d);
    return n;
}

static teeny_tensor *random_tensor(teeny_ctx *ctx, int ndim, const int64_t *shape, th_rng *r, float **host)
{
    teeny_tensor *t = th_tensor(ctx, ndim, shape);
    size_t n = (size_t)teeny_tensor_numel(t);
    float *x = th_malloc(n * sizeof *x);
    th_fill_normal(r, x, n, 0, 3);
    TH_OK(ctx, teeny_tensor_write(t, x, n));
    if (host)
        *host = x;
    else
        free(x);
    return t;
}

static void assert_tensor_eq(const teeny_tensor *t, const float *want, size_t n)
{
    float *x = th_read(t);
    ck_assert_int_eq(teeny_tensor_numel(t), (int64_t)n);
    ck_assert_msg(!memcmp(x, want, n * sizeof(float)), "tensor contents differ");
    free(x);
}

/* ---- npy ---- */

START_TEST(test_npy_roundtrip)
{
    static const int64_t shapes[][5] = {{7}, {3, 4}, {2, 3, 4, 5}, {1, 2, 1, 3, 2}, {1}};
    static const int ndims[] = {1, 2, 4, 5, 1};
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(31);
    char path[512];
    for (int i = 0; i < 5; i++) {
        float *x;
        teeny_tensor *t = random_tensor(ctx, ndims[i], shapes[i], &r, &x), *u = NULL;
        tmp_path(path, sizeof path, "a.npy");
        TH_OK(ctx, teeny_npy_save(t, path));
        TH_OK(ctx, teeny_npy_load(ctx, path, &u));
        ck_assert_int_eq(teeny_tensor_ndim(u), ndims[i]);
        for (int d = 0; d < ndims[i]; d++)
            ck_assert_int_eq(teeny_tensor_dim(u, d), shapes[i][d]);
        assert_tensor_eq(u, x, (size_t)teeny_tensor_numel(t));
        /* layout: v1.0, header padded to 64, dict as numpy writes it */
        size_t len;
        unsigned char *b = file_read(path, &len);
        size_t hlen = b[8] | (size_t)b[9] << 8;
        ck_assert(!memcmp(b, "\x93NUMPY\x01\x00", 8));
        ck_assert_int_eq((10 + hlen) % 64, 0);
        ck_assert_int_eq(len, 10 + hlen + (size_t)teeny_tensor_numel(t) * 4);
        ck_assert_int_eq(b[10 + hlen - 1], '\n');
        ck_assert_ptr_nonnull(strstr((char *)b + 10, "'descr': '<f4', 'fortran_order': False, 'shape': ("));
        if (i == 0)
            ck_assert_ptr_nonnull(strstr((char *)b + 10, "'shape': (7,), }"));
        if (i == 1)
            ck_assert_ptr_nonnull(strstr((char *)b + 10, "'shape': (3, 4), }"));
        free(b);
        free(x);
        teeny_tensor_destroy(t);
        teeny_tensor_destroy(u);
    }
}
END_TEST

START_TEST(test_npy_i32_and_views)
{
    teeny_ctx *ctx = th_ctx();
    th_rng r = th_rng_make(32);
    char path[512];
    int64_t s[2] = {4, 5}, big = 40, vs[2] = {3, 3};
    int32_t v[20], w[20];
    teeny_tensor *t = NULL, *u = NULL, *base, *view = NULL;
    for (int i = 0; i < 20; i++)
        v[i] = (int32_t)(th_next(&r) & 0xffffffff);
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 2, s, &t));
    TH_OK(ctx, teeny_tensor_write_i32(t, v, 20));
    tmp_path(path, sizeof path, "i.npy");
    TH_OK(ctx, teeny_npy_save(t, path));
    TH_OK(ctx, teeny_npy_load(ctx, path, &u));
    TH_STATUS(ctx, TEENY_OK, teeny_tensor_read_i32(u, w, 20));
    ck_assert(!memcmp(v, w, sizeof v));
    size_t len;
    unsigned char *b = file_read(path, &len);
    ck_assert_ptr_nonnull(strstr((char *)b + 10, "'descr': '<i4'"));
    free(b);
    teeny_tensor_destroy(u);

    /* a view saves just its range */
    float *x;
    base = random_tensor(ctx, 1, &big, &r, &x);
    TH_OK(ctx, teeny_tensor_view(base, 11, 2, vs, &view));
    tmp_path(path, sizeof path, "v.npy");
    TH_OK(ctx, teeny_npy_save(view, path));
    TH_OK(ctx, teeny_npy_load(ctx, path, &u));
    assert_tensor_eq(u, x + 11, 9);
    free(x);
    teeny_tensor_destroy(u);
    teeny_tensor_destroy(view);
    teeny_tensor_destroy(base);
    teeny_tensor_destroy(t);
}
END_TEST

/* An .npy file (v1.0 preamble, major as given) with the given header dict
 * and data bytes: data, or 0, 1, 2, ... (mod 256) when data is NULL. */
static void npy_write(const char *path, const char *dict, int major, const void *data, size_t data_bytes)
{
    size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64, hlen = total - 10;
    unsigned char *b = calloc(1, total + data_bytes + 1);
    ck_assert_ptr_nonnull(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    b[8] = (unsigned char)(hlen & 0xff);
    b[9] = (unsigned char)(hlen >> 8);
    memcpy(b + 10, dict, dl);
    memset(b + 10 + dl, ' ', hlen - dl - 1);
    b[total - 1] = '\n';
    for (size_t i = 0; i < data_bytes; i++)
        b[total + i] = data ? ((const unsigned char *)data)[i] : (unsigned char)i;
    file_write(path, b, total + data_bytes);
    free(b);
}

static void npy_make(const char *path, const char *dict, int major, size_t data_bytes)
{
    npy_write(path, dict, major, NULL, data_bytes);
}

/* n int64 values as little-endian bytes (what '<i8' holds on any host). */
static void put_le64(const int64_t *v, int n, unsigned char *out)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            out[8 * i + k] = (unsigned char)((uint64_t)v[i] >> (8 * k));
}

/* '<i8' into int32 tensors (values outside int32 refused, naming the
 * element and the value), '|b1' as 0/1, a 0-d array (rank 0 in
 * teeny_npy_read, [1] in teeny_npy_load), and teeny_npy_read's
 * header-only and too-small calls; big-endian and unknown dtypes refused. */
START_TEST(test_npy_dtypes)
{
    teeny_ctx *ctx = th_ctx();
    char path[512];
    unsigned char bytes[64];
    int32_t got[6];
    teeny_tensor *t = NULL;
    teeny_npy_info info;
    tmp_path(path, sizeof path, "dtypes.npy");

    /* int64 within int32, the extremes included */
    const int64_t in_range[6] = {0, -1, 7, INT32_MAX, INT32_MIN, 123456789};
    put_le64(in_range, 6, bytes);
    npy_write(path, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }", 1, bytes, 48);
    TH_OK(ctx, teeny_npy_load(ctx, path, &t));
    ck_assert_int_eq(teeny_tensor_ndim(t), 2);
    ck_assert_int_eq(teeny_tensor_dim(t, 1), 3);
    TH_OK(ctx, teeny_tensor_read_i32(t, got, 6));
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(got[i], in_range[i]);
    teeny_tensor_destroy(t);
    int64_t wide[6] = {0};
    memset(&info, 0, sizeof info);
    TH_OK(ctx, teeny_npy_read(ctx, path, &info, NULL, 0)); /* the header only */
    ck_assert_int_eq(info.dtype, TEENY_NPY_I64);
    ck_assert_int_eq(info.ndim, 2);
    ck_assert_int_eq(info.numel, 6);
    ck_assert_uint_eq(info.bytes, 48);
    TH_OK(ctx, teeny_npy_read(ctx, path, &info, wide, sizeof wide));
    ck_assert(!memcmp(wide, in_range, sizeof wide));
    /* dst too small: TEENY_ERR_ARG, dst and info untouched */
    memset(wide, 0x5a, sizeof wide);
    info.ndim = -7;
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_npy_read(ctx, path, &info, wide, 47));
    ck_assert_int_eq(info.ndim, -7);
    ck_assert_int_eq(((unsigned char *)wide)[0], 0x5a);

    /* one past int32 at either end: TEENY_ERR_RANGE naming element and value */
    static const struct { int64_t v; const char *text; } out_of_range[] = {
        {(int64_t)INT32_MAX + 1, "element 4 is 2147483648"},
        {(int64_t)INT32_MIN - 1, "element 4 is -2147483649"},
        {INT64_MAX, "element 4 is 9223372036854775807"},
    };
    for (size_t i = 0; i < sizeof out_of_range / sizeof *out_of_range; i++) {
        int64_t v[6] = {1, 2, 3, 4, out_of_range[i].v, 6};
        put_le64(v, 6, bytes);
        npy_write(path, "{'descr': '<i8', 'fortran_order': False, 'shape': (6,), }", 1, bytes, 48);
        t = (teeny_tensor *)ctx;
        TH_STATUS(ctx, TEENY_ERR_RANGE, teeny_npy_load(ctx, path, &t));
        ck_assert_ptr_null(t);
        ck_assert_msg(strstr(teeny_last_error(ctx), out_of_range[i].text), "%s", teeny_last_error(ctx));
        TH_OK(ctx, teeny_npy_read(ctx, path, &info, wide, sizeof wide)); /* whole in host memory */
        ck_assert(wide[4] == out_of_range[i].v);
    }

    /* bool: 0/1 bytes as int32 0/1; numpy's '|b1' and '<b1' spellings */
    const unsigned char flags[5] = {1, 0, 0, 1, 1};
    npy_write(path, "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }", 1, flags, 5);
    TH_OK(ctx, teeny_npy_load(ctx, path, &t));
    TH_OK(ctx, teeny_tensor_read_i32(t, got, 5));
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(got[i], flags[i]);
    teeny_tensor_destroy(t);
    TH_OK(ctx, teeny_npy_read(ctx, path, &info, bytes, 5));
    ck_assert_int_eq(info.dtype, TEENY_NPY_BOOL);
    ck_assert_uint_eq(info.bytes, 5);
    npy_write(path, "{'descr': '<b1', 'fortran_order': False, 'shape': (5,), }", 1, flags, 5);
    TH_OK(ctx, teeny_npy_load(ctx, path, &t));
    teeny_tensor_destroy(t);
    const unsigned char not_bool[3] = {0, 2, 1};
    npy_write(path, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 1, not_bool, 3);
    t = (teeny_tensor *)ctx;
    TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_npy_load(ctx, path, &t));
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "bool element 1 is byte 2"));

    /* a 0-d array: rank 0 as the file holds it, [1] as a tensor */
    const float two = 2.0f;
    unsigned char two_le[4];
    uint32_t bits;
    memcpy(&bits, &two, 4);
    for (int k = 0; k < 4; k++)
        two_le[k] = (unsigned char)(bits >> (8 * k));
    npy_write(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 1, two_le, 4);
    float back = 0;
    TH_OK(ctx, teeny_npy_read(ctx, path, &info, &back, sizeof back));
    ck_assert_int_eq(info.dtype, TEENY_NPY_F32);
    ck_assert_int_eq(info.ndim, 0);
    ck_assert_int_eq(info.numel, 1);
    ck_assert(back == 2.0f);
    TH_OK(ctx, teeny_npy_load(ctx, path, &t));
    ck_assert_int_eq(teeny_tensor_ndim(t), 1);
    ck_assert_int_eq(teeny_tensor_dim(t, 0), 1);
    teeny_tensor_destroy(t);
    put_le64(in_range, 1, bytes);
    npy_write(path, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 1, bytes, 8);
    TH_OK(ctx, teeny_npy_read(ctx, path, &info, NULL, 0));
    ck_assert_int_eq(info.ndim, 0);

    /* big-endian, unsigned, float64 and unknown dtypes: TEENY_ERR_FORMAT, naming the dtype ('<f2' is read:
     * tests/test_half.c; its big-endian twin is not) */
    static const struct { const char *descr; size_t bytes; } refused[] = {
        {">i8", 16}, {">f4", 8}, {">i4", 8}, {"<u8", 16}, {"<f8", 16}, {">f2", 4}, {"|u1", 2}, {"<c8", 16}, {"|O", 16},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }", refused[i].descr);
        npy_make(path, dict, 1, refused[i].bytes);
        t = (teeny_tensor *)ctx;
        teeny_status st = teeny_npy_load(ctx, path, &t);
        ck_assert_msg(st == TEENY_ERR_FORMAT, "%s: %s", refused[i].descr, teeny_status_name(st));
        ck_assert_ptr_null(t);
        ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), refused[i].descr));
        TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_npy_read(ctx, path, &info, NULL, 0));
    }
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_npy_read(NULL, path, &info, NULL, 0));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_npy_read(ctx, NULL, &info, NULL, 0));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_npy_read(ctx, path, NULL, NULL, 0));
}
END_TEST

START_TEST(test_npy_errors)
{
    teeny_ctx *ctx = th_ctx();
    char path[512], missing[512];
    teeny_tensor *t = (teeny_tensor *)ctx, *good = NULL;
    tmp_path(path, sizeof path, "bad.npy");
    /* what numpy writes (incl. a 0-d array and double quotes) loads */
    npy_make(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 24);
    TH_OK(ctx, teeny_npy_load(ctx, path, &good));
    ck_assert_int_eq(teeny_tensor_numel(good), 6);
    teeny_tensor_destroy(good);
    npy_make(path, "{\"shape\": (), \"fortran_order\": False, \"descr\": \"<i4\"}", 1, 4);
    TH_OK(ctx, teeny_npy_load(ctx, path, &good));
    ck_assert_int_eq(teeny_tensor_numel(good), 1);
    teeny_tensor_destroy(good);

    static const struct { const char *dict; int major; size_t bytes; teeny_status want; } bad[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 9, 24, TEENY_ERR_FORMAT},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 1, 48, TEENY_ERR_FORMAT},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 24, TEENY_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 1, 24, TEENY_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 23, TEENY_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 25, TEENY_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, }", 1, 24, TEENY_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 1, 24, TEENY_ERR_FORMAT},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 1, 24, TEENY_ERR_FORMAT},
        {"['descr', '<f4']", 1, 24, TEENY_ERR_FORMAT},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 0), }", 1, 0, TEENY_ERR_UNSUPPORTED},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 2), }", 1, 8, TEENY_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        npy_make(path, bad[i].dict, bad[i].major, bad[i].bytes);
        t = (teeny_tensor *)ctx;
        teeny_status st = teeny_npy_load(ctx, path, &t);
        ck_assert_msg(st == bad[i].want, "case %zu (%s): %s, want %s", i, bad[i].dict, teeny_status_name(st),
                      teeny_status_name(bad[i].want));
        ck_assert_ptr_null(t);
        ck_assert(strlen(teeny_last_error(ctx)) > 0);
    }
    /* every truncation of a good file */
    npy_make(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 1, 24);
    size_t len;
    unsigned char *b = file_read(path, &len);
    for (size_t cut = 0; cut < len; cut++) {
        file_write(path, b, cut);
        t = (teeny_tensor *)ctx;
        TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_npy_load(ctx, path, &t));
        ck_assert_ptr_null(t);
    }
    b[0] = 0x92; /* bad magic */
    file_write(path, b, len);
    TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_npy_load(ctx, path, &t));
    free(b);

    tmp_path(missing, sizeof missing, "no/such.npy");
    TH_STATUS(ctx, TEENY_ERR_IO, teeny_npy_load(ctx, missing, &t));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "no/such.npy"));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_npy_load(NULL, path, &t));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_npy_load(ctx, NULL, &t));
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_npy_load(ctx, path, NULL));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_npy_save(NULL, path));
    int64_t one = 1;
    good = th_tensor(ctx, 1, &one);
    TH_STATUS(ctx, TEENY_ERR_ARG, teeny_npy_save(good, NULL));
    TH_STATUS(ctx, TEENY_ERR_IO, teeny_npy_save(good, missing));
    teeny_tensor_destroy(good);
}
END_TEST

/* ---- safetensors ---- */

typedef struct {
    teeny_tensor *a, *base, *b;
    float *ha, *hbase;
    int64_t count, v[3];
} st_fixture;

static const int64_t A_SHAPE[2] = {3, 4}, B_SHAPE[1] = {5}, V_SHAPE[1] = {3};

static void st_fixture_make(teeny_ctx *ctx, st_fixture *fx, const char *path)
{
    th_rng r = th_rng_make(41);
    int64_t big = 17;
    teeny_st_writer *w = NULL;
    fx->a = random_tensor(ctx, 2, A_SHAPE, &r, &fx->ha);
    fx->base = random_tensor(ctx, 1, &big, &r, &fx->hbase);
    TH_OK(ctx, teeny_tensor_view(fx->base, 7, 1, B_SHAPE, &fx->b));
    fx->count = 1234567890123LL;
    fx->v[0] = -1;
    fx->v[1] = INT64_MAX;
    fx->v[2] = INT64_MIN;
    TH_OK(NULL, teeny_st_writer_create(&w));
    TH_OK(NULL, teeny_st_add_tensor(w, "conv1.weight", fx->a));
    TH_OK(NULL, teeny_st_add_i64(w, "bn.num_batches_tracked", 0, NULL, &fx->count));
    TH_OK(NULL, teeny_st_add_tensor(w, "bn.bias", fx->b));
    TH_OK(NULL, teeny_st_add_i64(w, "v", 1, V_SHAPE, fx->v));
    TH_OK(NULL, teeny_st_add_metadata(w, "epoch", "3"));
    TH_OK(NULL, teeny_st_add_metadata(w, "note", "quote \" backslash \\ unicode \xc3\xa9"));
    TH_OK(NULL, teeny_st_write(w, path));
    teeny_st_writer_destroy(w);
}

static void st_fixture_free(st_fixture *fx)
{
    teeny_tensor_destroy(fx->a);
    teeny_tensor_destroy(fx->b);
    teeny_tensor_destroy(fx->base);
    free(fx->ha);
    free(fx->hbase);
}

START_TEST(test_st_roundtrip)
{
    teeny_ctx *ctx = th_ctx();
    char path[512];
    st_fixture fx;
    teeny_st_file *f = NULL;
    int is_i64 = -1, ndim = -1;
    int64_t shape[TEENY_ST_MAX_DIMS], count = 0, v[3];
    tmp_path(path, sizeof path, "rt.safetensors");
    st_fixture_make(ctx, &fx, path);
    TH_OK(NULL, teeny_st_open(path, &f));
    ck_assert_int_eq(teeny_st_count(f), 4);
    ck_assert_str_eq(teeny_st_name(f, 0), "conv1.weight");
    ck_assert_str_eq(teeny_st_name(f, 1), "bn.num_batches_tracked");
    ck_assert_str_eq(teeny_st_name(f, 2), "bn.bias");
    ck_assert_str_eq(teeny_st_name(f, 3), "v");
    ck_assert_ptr_null(teeny_st_name(f, 4));
    ck_assert_ptr_null(teeny_st_name(f, -1));
    TH_OK(NULL, teeny_st_info(f, "conv1.weight", &is_i64, &ndim, shape));
    ck_assert(is_i64 == 0 && ndim == 2 && shape[0] == 3 && shape[1] == 4);
    TH_OK(NULL, teeny_st_info(f, "bn.num_batches_tracked", &is_i64, &ndim, shape));
    ck_assert(is_i64 == 1 && ndim == 0);
    TH_OK(NULL, teeny_st_info(f, "v", NULL, &ndim, NULL));
    ck_assert_int_eq(ndim, 1);

    teeny_tensor *a2 = th_tensor(ctx, 2, A_SHAPE), *b2 = th_tensor(ctx, 1, B_SHAPE);
    th_poison(a2);
    th_poison(b2);
    TH_OK(ctx, teeny_st_read_f32(f, "conv1.weight", a2));
    TH_OK(ctx, teeny_st_read_f32(f, "bn.bias", b2));
    assert_tensor_eq(a2, fx.ha, 12);
    assert_tensor_eq(b2, fx.hbase + 7, 5);
    TH_OK(NULL, teeny_st_read_i64(f, "bn.num_batches_tracked", &count, 1));
    ck_assert(count == fx.count);
    TH_OK(NULL, teeny_st_read_i64(f, "v", v, 3));
    ck_assert(!memcmp(v, fx.v, sizeof v));
    ck_assert_str_eq(teeny_st_metadata(f, "epoch"), "3");
    ck_assert_str_eq(teeny_st_metadata(f, "note"), "quote \" backslash \\ unicode \xc3\xa9");
    ck_assert_ptr_nonnull(teeny_st_metadata(f, "teenycl_checksum"));
    ck_assert_ptr_null(teeny_st_metadata(f, "nope"));
    teeny_st_close(f);
    teeny_st_close(NULL);
    teeny_tensor_destroy(a2);
    teeny_tensor_destroy(b2);
    st_fixture_free(&fx);
}
END_TEST

static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Parse the file as Python's safetensors would: the layout it requires. */
START_TEST(test_st_layout)
{
    teeny_ctx *ctx = th_ctx();
    char path[512], hex[17];
    st_fixture fx;
    size_t len;
    tmp_path(path, sizeof path, "layout.safetensors");
    st_fixture_make(ctx, &fx, path);
    unsigned char *b = file_read(path, &len);
    uint64_t n = le64(b);
    ck_assert_int_eq(n % 8, 0);
    ck_assert(8 + n <= len);
    ck_assert_int_eq(b[8], '{');
    cJSON *root = cJSON_ParseWithLength((const char *)b + 8, (size_t)n);
    ck_assert_ptr_nonnull(root);
    const unsigned char *data = b + 8 + n;
    size_t data_len = len - 8 - (size_t)n;
    static const char *names[] = {"conv1.weight", "bn.num_batches_tracked", "bn.bias", "v"};
    static const char *dtypes[] = {"F32", "I64", "F32", "I64"};
    static const int nd[] = {2, 0, 1, 1};
    static const size_t bytes[] = {48, 8, 20, 24};
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        cJSON *t = cJSON_GetObjectItemCaseSensitive(root, names[i]);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(t, "dtype")->valuestring, dtypes[i]);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t, "shape")), nd[i]);
        cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        ck_assert_int_eq(cJSON_GetArraySize(off), 2);
        ck_assert_int_eq((size_t)cJSON_GetArrayItem(off, 0)->valuedouble, at);
        ck_assert_int_eq((size_t)cJSON_GetArrayItem(off, 1)->valuedouble, at + bytes[i]);
        at += bytes[i];
    }
    ck_assert_int_eq(at, data_len);
    ck_assert(!memcmp(data, fx.ha, 48)); /* little-endian host: raw floats */
    ck_assert_int_eq((int64_t)le64(data + 48), fx.count);
    ck_assert(!memcmp(data + 56, fx.hbase + 7, 20));
    ck_assert_int_eq((int64_t)le64(data + 76 + 16), INT64_MIN);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(meta, "epoch")->valuestring, "3");
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv(data, data_len));
    ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(meta, "teenycl_checksum")->valuestring, hex);
    /* padding: spaces after the JSON */
    const char *end = NULL;
    cJSON_Delete(cJSON_ParseWithLengthOpts((const char *)b + 8, (size_t)n, &end, 0));
    for (const char *p = end; p < (const char *)b + 8 + n; p++)
        ck_assert_int_eq(*p, ' ');
    cJSON_Delete(root);
    free(b);
    st_fixture_free(&fx);
}
END_TEST

/* A file as another tool writes it: header JSON with spaces, entries not
 * in offset order, no teenycl checksums. */
static void st_make_raw(const char *path, const char *json, const unsigned char *data, size_t data_len)
{
    size_t jl = strlen(json);
    unsigned char *b = th_malloc(8 + jl + data_len);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)jl >> (8 * i));
    memcpy(b + 8, json, jl);
    memcpy(b + 8 + jl, data, data_len);
    file_write(path, b, 8 + jl + data_len);
    free(b);
}

START_TEST(test_st_foreign_and_malformed)
{
    teeny_ctx *ctx = th_ctx();
    char path[512];
    float vals[6] = {1, 2, 3, 4, 5, 6};
    unsigned char data[24];
    teeny_st_file *f = NULL;
    memcpy(data, vals, sizeof data);
    tmp_path(path, sizeof path, "foreign.safetensors");
    st_make_raw(path,
                "{\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [16, 24]}, "
                "\"__metadata__\": {\"format\": \"pt\"}, "
                "\"a\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 16]}}   ",
                data, 24);
    TH_OK(NULL, teeny_st_open(path, &f));
    ck_assert_int_eq(teeny_st_count(f), 2);
    ck_assert_str_eq(teeny_st_metadata(f, "format"), "pt");
    int64_t s2[1] = {2};
    teeny_tensor *t = th_tensor(ctx, 1, s2);
    TH_OK(ctx, teeny_st_read_f32(f, "b", t));
    assert_tensor_eq(t, vals + 4, 2);
    teeny_st_close(f);

    static const struct { const char *json; size_t data_len; const char *msg; } bad[] = {
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
         "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12, "overlap"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
         "\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [12, 20]}}", 20, "unused"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 12, "after the last"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 12, "data section"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 8, "needs"},
        {"{\"a\": {\"dtype\": \"F16\", \"shape\": [4], \"data_offsets\": [0, 8]}}", 8, "F16"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 8]}}", 8, "shape"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]}}", 8, "shape"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 0]}}", 8, "data_offsets"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0]}}", 8, "data_offsets"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2]}}", 8, "data_offsets"},
        {"{\"a\": {\"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "dtype"},
        {"{\"a\": 5}", 8, "not an object"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
         "\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "twice"},
        {"{\"__metadata__\": {\"k\": 5}}", 0, "not a string"},
        {"{\"__metadata__\": []}", 0, "not an object"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}} x", 8, "after the header"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}", 8, "JSON"},
        {"[1, 2]     ", 0, "start"},
        /* strings a C string would cut short or that are not text */
        {"{\"a\": {\"dtype\": \"F32\\u0000xx\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "NUL"},
        {"{\"a\\u0000b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "NUL"},
        {"{\"__metadata__\": {\"k\": \"v\\u0000\"}}", 0, "NUL"},
        {"{\"\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "empty name"},
        {"{\"a\xff\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "UTF-8"},
        {"{\"a\xc0\xaf\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "UTF-8"},
        {"{\"a\xed\xa0\x80\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "UTF-8"},
        {"{\"a\xf4\x90\x80\x80\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "UTF-8"},
        {"{\"a\xe2\x82\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 8, "UTF-8"},
        {"{\"__metadata__\": {\"k\": \"\x80\"}}", 0, "UTF-8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char zeros[32] = {0};
        st_make_raw(path, bad[i].json, zeros, bad[i].data_len);
        f = (teeny_st_file *)ctx;
        teeny_status st = teeny_st_open(path, &f);
        ck_assert_msg(st == TEENY_ERR_FORMAT, "case %zu: %s (%s)", i, teeny_status_name(st), teeny_last_error(NULL));
        ck_assert_ptr_null(f);
        ck_assert_msg(strstr(teeny_last_error(NULL), bad[i].msg) && strstr(teeny_last_error(NULL), path),
                      "case %zu: message \"%s\" lacks \"%s\" or the path", i, teeny_last_error(NULL), bad[i].msg);
    }
    { /* a raw NUL byte inside the dtype string */
        static const char raw[] = "{\"a\": {\"dtype\": \"F32\0xx\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
        unsigned char b[8 + sizeof raw - 1 + 8] = {(unsigned char)(sizeof raw - 1)};
        memcpy(b + 8, raw, sizeof raw - 1);
        file_write(path, b, sizeof b);
        f = (teeny_st_file *)ctx;
        TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_st_open(path, &f));
        ck_assert_ptr_null(f);
        ck_assert_msg(strstr(teeny_last_error(NULL), "NUL"), "%s", teeny_last_error(NULL));
    }
    /* what is still text loads: an escaped backslash before "u0000", a
     * multi-byte name, written raw and as an escape */
    st_make_raw(path,
                "{\"a\\\\u0000\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
                "\"\xc3\xa9\xf0\x9f\x98\x80\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}, "
                "\"\\u00e9x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
                data, 12);
    TH_OK(NULL, teeny_st_open(path, &f));
    ck_assert_str_eq(teeny_st_name(f, 0), "a\\u0000");
    ck_assert_str_eq(teeny_st_name(f, 1), "\xc3\xa9\xf0\x9f\x98\x80");
    ck_assert_str_eq(teeny_st_name(f, 2), "\xc3\xa9x");
    teeny_st_close(f);
    teeny_tensor_destroy(t);
}
END_TEST

/* Open must fail with FORMAT; any tensor read before never happens. */
static void expect_corrupt(const char *path, const char *what, long at)
{
    teeny_st_file *f = (teeny_st_file *)path;
    teeny_status st = teeny_st_open(path, &f);
    ck_assert_msg(st == TEENY_ERR_FORMAT, "%s at %ld: %s, want TEENY_ERR_FORMAT (%s)", what, at,
                  teeny_status_name(st), teeny_last_error(NULL));
    ck_assert_ptr_null(f);
}

START_TEST(test_st_corruption)
{
    teeny_ctx *ctx = th_ctx();
    char path[512], bad[512];
    st_fixture fx;
    size_t len;
    tmp_path(path, sizeof path, "good.safetensors");
    tmp_path(bad, sizeof bad, "bad.safetensors");
    st_fixture_make(ctx, &fx, path);
    unsigned char *b = file_read(path, &len), *c = th_malloc(len + 16);
    uint64_t n = le64(b);
    const char *key = strstr((const char *)b + 8, "\"teenycl_header_checksum\"");
    ck_assert_ptr_nonnull(key);
    size_t key_at = (size_t)(key - (const char *)b), key_len = strlen("\"teenycl_header_checksum\"");

    /* truncation at every length */
    for (size_t cut = 0; cut < len; cut++) {
        file_write(bad, b, cut);
        expect_corrupt(bad, "truncated", (long)cut);
    }
    /* trailing bytes */
    memcpy(c, b, len);
    memset(c + len, 0, 8);
    file_write(bad, c, len + 8);
    expect_corrupt(bad, "trailing bytes", (long)len);
    /* a flipped bit at every header byte: rejected, or (only in the
     * header-checksum key's own name) harmlessly accepted */
    for (size_t i = 8; i < 8 + n; i++)
        for (int bit = 0; bit < 8; bit += 5) {
            memcpy(c, b, len);
            c[i] ^= (unsigned char)(1u << bit);
            file_write(bad, c, len);
            teeny_st_file *f = NULL;
            teeny_status st = teeny_st_open(bad, &f);
            if (i > key_at && i < key_at + key_len - 1 && st == TEENY_OK) {
                int64_t v[3];
                TH_OK(NULL, teeny_st_read_i64(f, "v", v, 3));
                ck_assert(!memcmp(v, fx.v, sizeof v));
                teeny_st_close(f);
                continue;
            }
            ck_assert_msg(st == TEENY_ERR_FORMAT, "header byte %zu bit %d flipped: %s", i, bit,
                          teeny_status_name(st));
            ck_assert_ptr_null(f);
        }
    /* a flipped bit in the data: the checksum */
    for (size_t i = 8 + n; i < len; i += 3) {
        memcpy(c, b, len);
        c[i] ^= 0x10;
        file_write(bad, c, len);
        expect_corrupt(bad, "data byte flipped", (long)i);
        ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), "checksum"));
    }
    /* header length beyond the file, absurd, zero */
    static const uint64_t lens[] = {0, 1, 1ULL << 40, 1ULL << 63};
    for (size_t k = 0; k < 5; k++) {
        uint64_t v = k < 4 ? lens[k] : (uint64_t)len - 7;
        memcpy(c, b, len);
        for (int i = 0; i < 8; i++)
            c[i] = (unsigned char)(v >> (8 * i));
        file_write(bad, c, len);
        expect_corrupt(bad, "header length", (long)k);
    }

    /* wrong shape, missing key, wrong dtype: destinations unchanged */
    teeny_st_file *f = NULL;
    int64_t s34[2] = {4, 3}, s12[1] = {12}, count = 7;
    teeny_tensor *d1 = th_tensor(ctx, 2, s34), *d2 = th_tensor(ctx, 1, s12);
    TH_OK(ctx, teeny_tensor_fill(d1, 42.0f));
    TH_OK(ctx, teeny_tensor_fill(d2, 42.0f));
    TH_OK(NULL, teeny_st_open(path, &f));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_st_read_f32(f, "conv1.weight", d1));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "conv1.weight"));
    TH_STATUS(ctx, TEENY_ERR_SHAPE, teeny_st_read_f32(f, "conv1.weight", d2));
    TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_st_read_f32(f, "conv2.weight", d1));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), "conv2.weight"));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), path));
    TH_STATUS(ctx, TEENY_ERR_FORMAT, teeny_st_read_f32(f, "v", d1));
    TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_st_info(f, "conv2.weight", NULL, NULL, NULL));
    TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_st_read_i64(f, "conv1.weight", &count, 1));
    TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_st_read_i64(f, "v", &count, 1));
    TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_st_read_i64(f, "missing", &count, 1));
    ck_assert_int_eq(count, 7);
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_read_f32(f, "conv1.weight", NULL));
    {
        teeny_st_file *g = (teeny_st_file *)ctx;
        TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_open(NULL, &g));
        ck_assert_ptr_null(g);
    }
    float *x1 = th_read(d1), *x2 = th_read(d2);
    for (int i = 0; i < 12; i++)
        ck_assert(x1[i] == 42.0f && x2[i] == 42.0f);
    free(x1);
    free(x2);
    teeny_st_close(f);
    f = (teeny_st_file *)ctx;
    tmp_path(bad, sizeof bad, "none.safetensors");
    TH_STATUS(NULL, TEENY_ERR_IO, teeny_st_open(bad, &f));
    ck_assert_ptr_null(f);
    teeny_tensor_destroy(d1);
    teeny_tensor_destroy(d2);
    free(b);
    free(c);
    st_fixture_free(&fx);
}
END_TEST

START_TEST(test_st_crash_safety)
{
    teeny_ctx *ctx = th_ctx();
    char path[512], sub[512], nodir[512];
    st_fixture fx;
    size_t len0, len1;
    tmp_path(path, sizeof path, "keep.safetensors");
    st_fixture_make(ctx, &fx, path);
    unsigned char *before = file_read(path, &len0);
    teeny_st_writer *w = NULL;
    TH_OK(NULL, teeny_st_writer_create(&w));
    TH_OK(NULL, teeny_st_add_tensor(w, "x", fx.a));

    /* the directory does not exist: IO, nothing created */
    tmp_path(nodir, sizeof nodir, "missing-dir/x.safetensors");
    TH_STATUS(NULL, TEENY_ERR_IO, teeny_st_write(w, nodir));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), "missing-dir"));
    /* the target is a directory: the rename fails, the temp file is removed */
    tmp_path(sub, sizeof sub, "a-directory");
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    TH_STATUS(NULL, TEENY_ERR_IO, teeny_st_write(w, sub));
    ck_assert_int_eq(dir_count(tmp_dir, ".tmp-"), 0);
    /* an unwritable directory (permissions do not bind root) */
    if (geteuid() != 0) {
        ck_assert_int_eq(chmod(tmp_dir, 0500), 0);
        TH_STATUS(NULL, TEENY_ERR_IO, teeny_st_write(w, path));
        ck_assert_int_eq(chmod(tmp_dir, 0700), 0);
    }
    unsigned char *after = file_read(path, &len1);
    ck_assert(len0 == len1 && !memcmp(before, after, len0));
    free(after);
    ck_assert_int_eq(dir_count(tmp_dir, ".tmp-"), 0);
    /* a successful overwrite replaces the whole file */
    TH_OK(NULL, teeny_st_write(w, path));
    teeny_st_file *f = NULL;
    TH_OK(NULL, teeny_st_open(path, &f));
    ck_assert_int_eq(teeny_st_count(f), 1);
    teeny_st_close(f);
    ck_assert_int_eq(dir_count(tmp_dir, ".tmp-"), 0);
    teeny_st_writer_destroy(w);
    free(before);
    st_fixture_free(&fx);
}
END_TEST

/* A header of n one-float tensors "t<i>" (entry dup_of, when >= 0, is
 * renamed to entry 0's name), written to path without checksums. */
static void st_many(const char *path, int n, int dup_of)
{
    size_t cap = (size_t)n * 96 + 64, at = 0;
    char *h = th_malloc(cap);
    at += (size_t)snprintf(h + at, cap - at, "{");
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(h + at, cap - at, "%s\"t%d\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
                               i ? "," : "", i == dup_of ? 0 : i, 4 * i, 4 * i + 4);
    at += (size_t)snprintf(h + at, cap - at, "}");
    unsigned char len[8];
    for (int b = 0; b < 8; b++)
        len[b] = (unsigned char)((uint64_t)at >> (8 * b));
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(len, 1, 8, f), 8);
    ck_assert_int_eq(fwrite(h, 1, at, f), at);
    float *data = calloc((size_t)n, sizeof *data);
    ck_assert_ptr_nonnull(data);
    for (int i = 0; i < n; i++)
        data[i] = (float)i;
    ck_assert_int_eq(fwrite(data, 4, (size_t)n, f), (size_t)n);
    fclose(f);
    free(data);
    free(h);
}

/* Parsing is linear-log in the entry count: 200K tensors open in well under
 * a few seconds (the old duplicate scan was quadratic: 31 s for 100K), every
 * name is found, and a duplicate among them is still rejected. */
START_TEST(test_st_many_entries)
{
    enum { N = 200000 };
    char path[512];
    teeny_st_file *f = NULL;
    int64_t shape[1];
    int ndim, is_i64;
    tmp_path(path, sizeof path, "many.safetensors");
    st_many(path, N, -1);
    double t0 = now_s();
    TH_OK(NULL, teeny_st_open(path, &f));
    double open_s = now_s() - t0;
    ck_assert_int_eq(teeny_st_count(f), N);
    t0 = now_s();
    for (int i = 0; i < N; i += 7) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        TH_OK(NULL, teeny_st_info(f, name, &is_i64, &ndim, shape));
        ck_assert(!is_i64 && ndim == 1 && shape[0] == 1);
    }
    double find_s = now_s() - t0;
    TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_st_info(f, "t-1", NULL, NULL, NULL));
    teeny_st_close(f);
    ck_assert_msg(open_s < 4.0 && find_s < 2.0, "200K entries: open %.2f s, lookups %.2f s", open_s, find_s);

    st_many(path, N, N - 5);
    f = (teeny_st_file *)path;
    t0 = now_s();
    TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_st_open(path, &f));
    ck_assert_msg(now_s() - t0 < 4.0, "200K entries with a duplicate: %.2f s", now_s() - t0);
    ck_assert_ptr_null(f);
    ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), "tensor t0 appears twice"));
}
END_TEST

START_TEST(test_st_writer_errors)
{
    teeny_ctx *ctx = th_ctx();
    teeny_st_writer *w = NULL;
    int64_t one = 1, neg = -1, v = 5;
    teeny_tensor *t = th_tensor(ctx, 1, &one), *i32 = NULL;
    TH_OK(ctx, teeny_tensor_create_i32(ctx, 1, &one, &i32));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_writer_create(NULL));
    TH_OK(NULL, teeny_st_writer_create(&w));
    TH_OK(NULL, teeny_st_add_tensor(w, "t", t));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_tensor(w, "t", t));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), "already"));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_tensor(w, "", t));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_tensor(w, "__metadata__", t));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_tensor(w, "n", NULL));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_tensor(w, NULL, t));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_tensor(NULL, "n", t));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_tensor(w, "i", i32));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_i64(w, "t", 0, NULL, &v));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_i64(w, "n", 1, &neg, &v));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_i64(w, "n", 1, NULL, &v));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_i64(w, "n", 9, &one, &v));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_i64(w, "n", 1, &one, NULL));
    TH_OK(NULL, teeny_st_add_metadata(w, "k", "v"));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_metadata(w, "k", "w"));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_metadata(w, "teenycl_checksum", "0"));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_metadata(w, "", "v"));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_add_metadata(w, "x", NULL));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_write(w, NULL));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_write(NULL, "x"));
    teeny_st_writer_destroy(w);
    teeny_st_writer_destroy(NULL);
    teeny_tensor_destroy(t);
    teeny_tensor_destroy(i32);
}
END_TEST

/* A tensor destroyed between teeny_st_add_tensor and teeny_st_write: the
 * writer holds a reference, so the write reports it (TEENY_ERR_ARG, no file)
 * instead of reading freed memory (ASan: make check-asan); and a writer
 * destroyed first leaves the tensor usable. */
START_TEST(test_st_writer_destroyed_tensor)
{
    teeny_ctx *ctx = th_ctx();
    teeny_st_writer *w = NULL;
    char path[512];
    int64_t shape[1] = {3};
    float in[3] = {1.5f, -2.0f, 4.25f}, out[3];
    tmp_path(path, sizeof path, "destroyed.safetensors");
    teeny_tensor *a = th_tensor_from(ctx, 1, shape, in), *b = th_tensor_from(ctx, 1, shape, in);
    TH_OK(NULL, teeny_st_writer_create(&w));
    TH_OK(NULL, teeny_st_add_tensor(w, "b", b));
    TH_OK(NULL, teeny_st_add_tensor(w, "a", a));
    teeny_tensor_destroy(a);
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_st_write(w, path));
    ck_assert_msg(strstr(teeny_last_error(NULL), "tensor a was destroyed") != NULL, "%s", teeny_last_error(NULL));
    ck_assert_int_ne(access(path, F_OK), 0);
    teeny_st_writer_destroy(w); /* drops the last reference to a */
    TH_OK(ctx, teeny_tensor_read(b, out, 3));
    ck_assert(!memcmp(in, out, sizeof in));
    teeny_tensor_destroy(b);
}
END_TEST

/* ---- IDX ---- */

#define FMNIST "/usr/share/datasets/fashion-mnist/"

static int exists(const char *path)
{
    return access(path, R_OK) == 0;
}

START_TEST(test_idx_fashion_mnist)
{
    teeny_idx *img = NULL, *lab = NULL;
    if (!exists(FMNIST "t10k-images-idx3-ubyte.gz") || !exists(FMNIST "t10k-labels-idx1-ubyte.gz")) {
        th_skip("Fashion-MNIST test set missing (apt-get install dataset-fashion-mnist)");
    }
    TH_OK(NULL, teeny_idx_load(FMNIST "t10k-images-idx3-ubyte.gz", &img));
    TH_OK(NULL, teeny_idx_load(FMNIST "t10k-labels-idx1-ubyte.gz", &lab));
    ck_assert_int_eq(teeny_idx_ndim(img), 3);
    ck_assert_int_eq(teeny_idx_dim(img, 0), 10000);
    ck_assert_int_eq(teeny_idx_dim(img, 1), 28);
    ck_assert_int_eq(teeny_idx_dim(img, 2), 28);
    ck_assert_int_eq(teeny_idx_dim(img, 3), -1);
    ck_assert_int_eq(teeny_idx_ndim(lab), 1);
    ck_assert_int_eq(teeny_idx_dim(lab, 0), 10000);
    TH_OK(NULL, teeny_idx_check_labels(lab, 10));
    TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_idx_check_labels(lab, 5));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), "label "));
    TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_idx_check_labels(img, 10));
    /* every class present, pixels span 0..255 */
    int seen[10] = {0}, lo = 255, hi = 0;
    const uint8_t *l = teeny_idx_data(lab), *p = teeny_idx_data(img);
    for (int i = 0; i < 10000; i++)
        seen[l[i]]++;
    for (int c = 0; c < 10; c++)
        ck_assert_int_eq(seen[c], 1000); /* the t10k set is balanced */
    for (int i = 0; i < 10000 * 784; i++) {
        lo = p[i] < lo ? p[i] : lo;
        hi = p[i] > hi ? p[i] : hi;
    }
    ck_assert(lo == 0 && hi == 255);
    teeny_idx_free(img);
    teeny_idx_free(lab);
    if (exists(FMNIST "train-labels-idx1-ubyte.gz")) {
        TH_OK(NULL, teeny_idx_load(FMNIST "train-labels-idx1-ubyte.gz", &lab));
        ck_assert_int_eq(teeny_idx_dim(lab, 0), 60000);
        TH_OK(NULL, teeny_idx_check_labels(lab, 10));
        teeny_idx_free(lab);
    }
}
END_TEST

/* Write an IDX file (gzip when gz) from a header and values. */
static void idx_make(const char *path, int gz, const unsigned char *bytes, size_t len)
{
    if (!gz) {
        file_write(path, bytes, len);
        return;
    }
    gzFile g = gzopen(path, "wb");
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(gzwrite(g, bytes, (unsigned)len), (int)len);
    ck_assert_int_eq(gzclose(g), Z_OK);
}

START_TEST(test_idx_synthetic)
{
    int gz = _i;
    char path[512];
    unsigned char good[4 + 8 + 6] = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 9, 8, 7, 6, 5, 4};
    unsigned char buf[64];
    teeny_idx *idx = NULL;
    tmp_path(path, sizeof path, gz ? "s.idx.gz" : "s.idx");
    idx_make(path, gz, good, sizeof good);
    TH_OK(NULL, teeny_idx_load(path, &idx));
    ck_assert_int_eq(teeny_idx_ndim(idx), 2);
    ck_assert_int_eq(teeny_idx_dim(idx, 0), 2);
    ck_assert_int_eq(teeny_idx_dim(idx, 1), 3);
    ck_assert(!memcmp(teeny_idx_data(idx), good + 12, 6));
    TH_STATUS(NULL, TEENY_ERR_SHAPE, teeny_idx_check_labels(idx, 10));
    teeny_idx_free(idx);

    /* header defects */
    static const struct { int at; unsigned char value; const char *msg; } defects[] = {
        {0, 1, "magic"}, {1, 8, "magic"}, {2, 0x0d, "type"}, {2, 0x09, "type"},
        {3, 0, "dimensions"}, {3, 5, "dimensions"}, {7, 0, "is 0"}, {3, 1, "trailing"}, {3, 4, "truncated"},
    };
    for (size_t k = 0; k < sizeof defects / sizeof defects[0]; k++) {
        memcpy(buf, good, sizeof good);
        buf[defects[k].at] = defects[k].value;
        idx_make(path, gz, buf, sizeof good);
        idx = (teeny_idx *)buf;
        teeny_status st = teeny_idx_load(path, &idx);
        ck_assert_msg(st == TEENY_ERR_FORMAT, "defect %zu: %s", k, teeny_status_name(st));
        ck_assert_ptr_null(idx);
        ck_assert_msg(strstr(teeny_last_error(NULL), defects[k].msg), "defect %zu: \"%s\" lacks \"%s\"", k,
                      teeny_last_error(NULL), defects[k].msg);
    }
    /* a product past 2^31 - 1 values */
    unsigned char huge[12] = {0, 0, 8, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 2};
    idx_make(path, gz, huge, sizeof huge);
    TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_idx_load(path, &idx));
    /* every truncation, trailing bytes */
    for (size_t cut = 0; cut < sizeof good; cut++) {
        idx_make(path, gz, good, cut);
        TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_idx_load(path, &idx));
    }
    memcpy(buf, good, sizeof good);
    buf[sizeof good] = 1;
    idx_make(path, gz, buf, sizeof good + 1);
    TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_idx_load(path, &idx));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), "trailing"));
    if (gz) { /* a gzip stream cut short */
        size_t len;
        idx_make(path, 1, good, sizeof good);
        unsigned char *z = file_read(path, &len);
        for (size_t cut = 10; cut < len - 1; cut += 3) {
            file_write(path, z, cut);
            TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_idx_load(path, &idx));
        }
        free(z);
    }
    /* labels: one out of range */
    unsigned char labels[8 + 6] = {0, 0, 8, 1, 0, 0, 0, 6, 0, 1, 9, 10, 2, 200};
    idx_make(path, gz, labels, sizeof labels);
    TH_OK(NULL, teeny_idx_load(path, &idx));
    TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_idx_check_labels(idx, 10));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), "label 3 is 10"));
    TH_OK(NULL, teeny_idx_check_labels(idx, 201));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_idx_check_labels(idx, 0));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_idx_check_labels(NULL, 10));
    teeny_idx_free(idx);
    teeny_idx_free(NULL);

    tmp_path(path, sizeof path, "no-such.idx");
    TH_STATUS(NULL, TEENY_ERR_IO, teeny_idx_load(path, &idx));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), "no-such.idx"));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_idx_load(NULL, &idx));
    TH_STATUS(NULL, TEENY_ERR_ARG, teeny_idx_load(path, NULL));
    ck_assert_int_eq(teeny_idx_ndim(NULL), 0);
    ck_assert_int_eq(teeny_idx_dim(NULL, 0), -1);
    ck_assert_ptr_null(teeny_idx_data(NULL));
}
END_TEST

/* ---- every reader against paths that are not regular files ---- */

/* A FIFO (no writer: a plain open would block forever) and a directory:
 * every loader returns TEENY_ERR_IO at once, naming the path. SIGALRM
 * ends the run if one blocks. */
START_TEST(test_io_not_regular)
{
    teeny_ctx *ctx = th_ctx();
    char fifo[512], dir[512], value[32];
    const char *paths[2] = {tmp_path(fifo, sizeof fifo, "a-fifo"), tmp_path(dir, sizeof dir, "a-dir")};
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    alarm(60);
    for (int i = 0; i < 2; i++) {
        const char *p = paths[i];
        teeny_st_file *f = (teeny_st_file *)ctx;
        teeny_tensor *t = (teeny_tensor *)ctx;
        teeny_idx *idx = (teeny_idx *)ctx;
        double t0 = now_s();
        TH_STATUS(NULL, TEENY_ERR_IO, teeny_st_open(p, &f));
        ck_assert_ptr_null(f);
        ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), p));
        TH_STATUS(ctx, TEENY_ERR_IO, teeny_npy_load(ctx, p, &t));
        ck_assert_ptr_null(t);
        ck_assert_ptr_nonnull(strstr(teeny_last_error(ctx), p));
        TH_STATUS(NULL, TEENY_ERR_IO, teeny_idx_load(p, &idx));
        ck_assert_ptr_null(idx);
        ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), p));
        TH_STATUS(NULL, TEENY_ERR_IO, teeny_checkpoint_metadata(p, "epoch", value, sizeof value));
        ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), i ? "directory" : "regular"));
        ck_assert_msg(now_s() - t0 < 5.0, "%s: the loaders took %.1f s", p, now_s() - t0);
    }
    alarm(0);
}
END_TEST

/* ---- sizes declared by headers are checked before anything is allocated ---- */

#if defined(__SANITIZE_ADDRESS__)
#define TH_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TH_ASAN 1
#endif
#endif

enum { LOAD_NPY, LOAD_IDX };

/* Run one loader in a forked child whose address space allows only 256 MiB
 * more than it has now, so a loader that allocates what a header claims
 * (GiBs) fails with TEENY_ERR_NOMEM instead of reading a 20-byte file. The
 * child touches no OpenCL object: both loaders reject these files before
 * creating a tensor. Under ASan (which reserves terabytes of shadow) the
 * limit is left off and only the status is checked. */
static teeny_status load_small(int which, const char *path)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        teeny_status st;
#ifndef TH_ASAN
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (f && fscanf(f, "%ld", &pages) == 1) {
            struct rlimit rl;
            rl.rlim_cur = rl.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (256u << 20);
            setrlimit(RLIMIT_AS, &rl);
        }
        if (f)
            fclose(f);
#endif
        if (which == LOAD_NPY) {
            teeny_tensor *t = NULL;
            st = teeny_npy_load(th_ctx(), path, &t);
        } else {
            teeny_idx *idx = NULL;
            st = teeny_idx_load(path, &idx);
            teeny_idx_free(idx);
        }
        _exit((int)st & 0xff);
    }
    int ws = 0;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    ck_assert_msg(WIFEXITED(ws), "the loader died (status 0x%x)", ws);
    return (teeny_status)(int8_t)WEXITSTATUS(ws);
}

START_TEST(test_io_declared_sizes)
{
    char path[512];
    /* npy: a 128-byte file whose header claims 4e9 bytes of data */
    tmp_path(path, sizeof path, "huge.npy");
    npy_make(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 10000), }", 1, 64);
    ck_assert_int_eq(load_small(LOAD_NPY, path), TEENY_ERR_FORMAT);
    teeny_tensor *t = NULL;
    TH_STATUS(th_ctx(), TEENY_ERR_FORMAT, teeny_npy_load(th_ctx(), path, &t));
    ck_assert_ptr_nonnull(strstr(teeny_last_error(th_ctx()), "truncated"));
    /* npy: a header length past the end of the file */
    npy_make(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1, 8);
    {
        size_t len;
        unsigned char *b = file_read(path, &len);
        b[8] = 0xff;
        b[9] = 0xff;
        file_write(path, b, len);
        free(b);
        TH_STATUS(th_ctx(), TEENY_ERR_FORMAT, teeny_npy_load(th_ctx(), path, &t));
    }

    /* IDX: a 20-byte file claiming 2^31 - 1 values, plain and gzip */
    unsigned char huge[20] = {0, 0, 8, 2, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8};
    for (int gz = 0; gz < 2; gz++) {
        teeny_idx *idx = NULL;
        tmp_path(path, sizeof path, gz ? "huge.idx.gz" : "huge.idx");
        idx_make(path, gz, huge, sizeof huge);
        ck_assert_int_eq(load_small(LOAD_IDX, path), TEENY_ERR_FORMAT);
        TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_idx_load(path, &idx));
        ck_assert_ptr_nonnull(strstr(teeny_last_error(NULL), "truncated"));
    }
    /* gzip: a 1 MiB run of zeros compresses to ~1 KiB; a header claiming
     * 8 MiB is past what that can inflate to, one claiming 1 MiB loads */
    {
        size_t n = (1u << 20) + 12;
        unsigned char *b = calloc(1, n);
        teeny_idx *idx = NULL;
        ck_assert_ptr_nonnull(b);
        memcpy(b, (unsigned char[]){0, 0, 8, 2, 0, 0x10, 0, 0, 0, 0, 0, 1}, 12);
        tmp_path(path, sizeof path, "zeros.idx.gz");
        idx_make(path, 1, b, n);
        TH_OK(NULL, teeny_idx_load(path, &idx));
        ck_assert_int_eq(teeny_idx_dim(idx, 0), 1 << 20);
        teeny_idx_free(idx);
        b[9] = 0x80; /* 8 MiB */
        idx_make(path, 1, b, 12);
        ck_assert_int_eq(load_small(LOAD_IDX, path), TEENY_ERR_FORMAT);
        free(b);
    }
}
END_TEST

/* Concatenated gzip members load; anything else after the stream is
 * TEENY_ERR_FORMAT (zlib's gzread silently ignored it). */
START_TEST(test_idx_gzip_trailing)
{
    char path[512], part[512];
    unsigned char good[4 + 8 + 6] = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 9, 8, 7, 6, 5, 4};
    size_t a_len, b_len;
    teeny_idx *idx = NULL;
    tmp_path(path, sizeof path, "t.idx.gz");
    tmp_path(part, sizeof part, "part.gz");
    idx_make(part, 1, good, 10);
    unsigned char *a = file_read(part, &a_len);
    idx_make(part, 1, good + 10, sizeof good - 10);
    unsigned char *b = file_read(part, &b_len);
    unsigned char *both = th_malloc(a_len + b_len + 8);
    memcpy(both, a, a_len);
    memcpy(both + a_len, b, b_len);
    file_write(path, both, a_len + b_len);
    TH_OK(NULL, teeny_idx_load(path, &idx));
    ck_assert(!memcmp(teeny_idx_data(idx), good + 12, 6));
    teeny_idx_free(idx);
    static const char *tails[] = {"x", "\0\0\0\0", "\x1f", "\x1f\x8b\x08garbage"};
    idx_make(part, 1, good, sizeof good);
    free(a);
    a = file_read(part, &a_len);
    for (size_t k = 0; k < sizeof tails / sizeof tails[0]; k++) {
        size_t tl = k == 1 ? 4 : strlen(tails[k]);
        memcpy(both, a, a_len);
        memcpy(both + a_len, tails[k], tl);
        file_write(path, both, a_len + tl);
        idx = (teeny_idx *)path;
        TH_STATUS(NULL, TEENY_ERR_FORMAT, teeny_idx_load(path, &idx));
        ck_assert_ptr_null(idx);
        ck_assert(strlen(teeny_last_error(NULL)) > 0);
    }
    free(a);
    free(b);
    free(both);
}
END_TEST

/* ---- interrupted and failing saves (host-only data: the forked children
 * never touch OpenCL, teeny_st_add_i64 keeps its values in host memory) ---- */

/* Save n int64 values v[i] = base + i to path (a few MB). */
static teeny_status save_i64(const char *path, const int64_t *v, int64_t n)
{
    teeny_st_writer *w = NULL;
    teeny_status st = teeny_st_writer_create(&w);
    if (st == TEENY_OK)
        st = teeny_st_add_i64(w, "values", 1, &n, v);
    if (st == TEENY_OK)
        st = teeny_st_add_metadata(w, "what", "kill test");
    if (st == TEENY_OK)
        st = teeny_st_write(w, path);
    teeny_st_writer_destroy(w);
    return st;
}

static void fill_i64(int64_t *v, int64_t n, int64_t base)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = base + i;
}

/* path loads, and holds exactly one of the two versions; returns which. */
static int64_t loaded_version(const char *path, int64_t n, int64_t base_a, int64_t base_b)
{
    teeny_st_file *f = NULL;
    int64_t *got = th_malloc((size_t)n * sizeof *got), base;
    TH_OK(NULL, teeny_st_open(path, &f));
    TH_OK(NULL, teeny_st_read_i64(f, "values", got, (size_t)n));
    teeny_st_close(f);
    base = got[0];
    ck_assert_msg(base == base_a || base == base_b, "the file holds neither version (starts %lld)", (long long)base);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == base + i, "value %lld mixes versions", (long long)i);
    free(got);
    return base;
}

static uint32_t host_tag(void)
{
    char name[256] = "";
    uint32_t h = 2166136261u;
    gethostname(name, sizeof name - 1);
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h;
}

static void touch(const char *path, time_t age)
{
    struct timespec ts[2];
    file_write(path, "x", 1);
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[0].tv_sec -= age;
    ts[1] = ts[0];
    ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static int present(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* Stale temp files of the same target are removed on the next save: a dead
 * writer's (its pid is gone), any untouched for over an hour, and earlier
 * builds' pid-less ones by age; a live writer's recent temp, another host's
 * recent one and other targets' temps stay. */
START_TEST(test_st_stale_temps)
{
    char target[512], p[16][600];
    int64_t v[4] = {1, 2, 3, 4};
    uint32_t host = host_tag();
    pid_t live = fork(), dead;
    ck_assert_int_ge(live, 0);
    if (live == 0) {
        pause();
        _exit(0);
    }
    dead = fork();
    ck_assert_int_ge(dead, 0);
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    tmp_path(target, sizeof target, "target.safetensors");
    static const struct { int which_pid; int other_host; time_t age; int other_target; int legacy; int removed; } c[] = {
        {0, 0, 0, 0, 0, 1},         /* dead writer */
        {1, 0, 0, 0, 0, 0},         /* live writer, recent */
        {1, 0, 7200, 0, 0, 1},      /* live pid, untouched for 2 h (a reused pid) */
        {0, 1, 0, 0, 0, 0},         /* another host's, recent */
        {0, 1, 7200, 0, 0, 1},      /* another host's, 2 h old */
        {0, 0, 0, 1, 0, 0},         /* a dead writer of another target */
        {0, 0, 0, 0, 1, 0},         /* an earlier build's, recent */
        {0, 0, 7200, 0, 1, 1},      /* an earlier build's, 2 h old */
    };
    int n = (int)(sizeof c / sizeof c[0]);
    for (int i = 0; i < n; i++) {
        char name[128];
        if (c[i].legacy)
            snprintf(name, sizeof name, "target.safetensors.tmp-Ab%04d", i);
        else
            snprintf(name, sizeof name, "%s.tmp-%08lx-%ld-Xy%04d", c[i].other_target ? "other.safetensors" : "target.safetensors",
                     (unsigned long)(c[i].other_host ? host ^ 0x1234u : host), (long)(c[i].which_pid ? live : dead), i);
        snprintf(p[i], sizeof p[i], "%s/%s", tmp_dir, name);
        touch(p[i], c[i].age);
    }
    TH_OK(NULL, save_i64(target, v, 4));
    for (int i = 0; i < n; i++)
        ck_assert_msg(present(p[i]) == !c[i].removed, "case %d (%s): %s", i, p[i],
                      c[i].removed ? "was not removed" : "was removed");
    kill(live, SIGKILL);
    waitpid(live, NULL, 0);
    for (int i = 0; i < n; i++)
        unlink(p[i]);
    unlink(target);
}
END_TEST

/* A child saving a few MB is killed at a random point: the target is the
 * old or the new version, whole and loadable, and the next save leaves no
 * temp file behind. A few kills here, 60 under TEENY_TEST_FULL. */
START_TEST(test_st_killed_save)
{
    enum { N = 512 * 1024 }; /* 4 MiB of int64 */
    char path[512];
    int64_t *v = th_malloc(N * sizeof *v);
    int kills = th_full() ? 60 : 4, saw_old = 0, saw_new = 0, saw_litter = 0;
    th_rng r = th_rng_make(0x6b696c6cu);
    double full_s;
    tmp_path(path, sizeof path, "killed.safetensors");
    /* how long a child's uninterrupted save takes, fork to exit, to spread
     * the kills over it */
    fill_i64(v, N, 1000);
    fflush(NULL);
    double t0 = now_s();
    pid_t first = fork();
    ck_assert_int_ge(first, 0);
    if (first == 0)
        _exit(save_i64(path, v, N) == TEENY_OK ? 0 : 1);
    int first_ws;
    ck_assert_int_eq(waitpid(first, &first_ws, 0), first);
    full_s = now_s() - t0;
    ck_assert(WIFEXITED(first_ws) && WEXITSTATUS(first_ws) == 0);
    for (int k = 0; k < kills; k++) {
        int64_t old_base = 1000000 * (int64_t)k, new_base = old_base + 500000;
        fill_i64(v, N, old_base);
        TH_OK(NULL, save_i64(path, v, N));
        fill_i64(v, N, new_base);
        fflush(NULL);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            _exit(save_i64(path, v, N) == TEENY_OK ? 0 : 1);
        double delay = th_uniform(&r, 0.0, 1.1 * full_s);
        struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int ws;
        ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
        ck_assert_msg(WIFSIGNALED(ws) || (WIFEXITED(ws) && WEXITSTATUS(ws) == 0), "kill %d: the save failed", k);
        if (loaded_version(path, N, old_base, new_base) == old_base)
            saw_old++;
        else
            saw_new++;
        saw_litter += dir_count(tmp_dir, ".tmp-") > 0;
        /* the next save removes the dead child's temp file */
        fill_i64(v, N, old_base + 1);
        TH_OK(NULL, save_i64(path, v, N));
        ck_assert_msg(dir_count(tmp_dir, ".tmp-") == 0, "kill %d: temp files left after the next save", k);
        loaded_version(path, N, old_base + 1, old_base + 1);
    }
    fprintf(stderr, "killed saves: %d (old version left %d times, new %d; temp litter after %d kills; a save takes %.3f s)\n",
            kills, saw_old, saw_new, saw_litter, full_s);
    unlink(path);
    free(v);
}
END_TEST

/* A full file system (RLIMIT_FSIZE in a forked child, SIGXFSZ ignored so
 * write fails with EFBIG): TEENY_ERR_IO, the old file untouched, no temp. */
START_TEST(test_st_disk_full)
{
    enum { N = 256 * 1024 };
    char path[512];
    int64_t *v = th_malloc(N * sizeof *v);
    size_t len0, len1;
    tmp_path(path, sizeof path, "full.safetensors");
    fill_i64(v, 64, 7);
    {
        int64_t n = 64;
        TH_OK(NULL, save_i64(path, v, n));
    }
    unsigned char *before = file_read(path, &len0);
    fill_i64(v, N, 9);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct rlimit rl = {256 * 1024, 256 * 1024};
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(100);
        teeny_status st = save_i64(path, v, N);
        _exit(st == TEENY_ERR_IO && strstr(teeny_last_error(NULL), "too large") ? 0 : 10 + (int)(st & 0x3f));
    }
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the save in a full file system: exit %d (0: IO error naming EFBIG)",
                  WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    unsigned char *after = file_read(path, &len1);
    ck_assert(len0 == len1 && !memcmp(before, after, len0));
    ck_assert_int_eq(dir_count(tmp_dir, ".tmp-"), 0);
    free(before);
    free(after);
    free(v);
    unlink(path);
}
END_TEST

Suite *suite_io(void)
{
    Suite *s = suite_create("io");
    TCase *npy = tcase_create("npy"), *st = tcase_create("safetensors"), *idx = tcase_create("idx");
    TCase *files = tcase_create("files"), *crash = tcase_create("crash");
    TCase *all[] = {npy, st, idx, files, crash};
    for (int i = 0; i < 5; i++)
        tcase_add_unchecked_fixture(all[i], dir_setup, dir_teardown);
    tcase_add_test(npy, test_npy_roundtrip);
    tcase_add_test(npy, test_npy_i32_and_views);
    tcase_add_test(npy, test_npy_errors);
    tcase_add_test(npy, test_npy_dtypes);
    tcase_add_test(st, test_st_roundtrip);
    tcase_add_test(st, test_st_layout);
    tcase_add_test(st, test_st_foreign_and_malformed);
    tcase_add_test(st, test_st_corruption);
    tcase_add_test(st, test_st_crash_safety);
    tcase_add_test(st, test_st_writer_errors);
    tcase_add_test(st, test_st_writer_destroyed_tensor);
    tcase_add_test(st, test_st_many_entries);
    tcase_add_test(idx, test_idx_fashion_mnist);
    tcase_add_loop_test(idx, test_idx_synthetic, 0, 2);
    suite_add_tcase(s, npy);
    suite_add_tcase(s, st);
    tcase_add_test(files, test_io_not_regular);
    tcase_add_test(files, test_io_declared_sizes);
    tcase_add_test(idx, test_idx_gzip_trailing);
    suite_add_tcase(s, idx);
    tcase_add_test(crash, test_st_stale_temps);
    tcase_add_test(crash, test_st_killed_save);
    tcase_add_test(crash, test_st_disk_full);
    suite_add_tcase(s, files);
    suite_add_tcase(s, crash);
    return s;
}
