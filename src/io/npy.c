/*
 * npy.c -- NumPy .npy files in C order. Saves fp32 ('<f4') and int32
 * ('<i4') tensors as version 1.0 (a 10-byte preamble, then a
 * Python-literal header dict padded with spaces and a newline to a
 * multiple of 64 bytes, then the data, little-endian), and host data of
 * any of the read types (teeny_npy_write). Reads versions 1.0 to 3.0 of
 * '<f4', '<i4', '<i8', '|b1' (bool, one byte 0 or 1) and '<f2' (half):
 * teeny_npy_read into host memory as the file holds it (its own rank, 0
 * for a 0-d array; int64 as int64), teeny_npy_load into a tensor (int64
 * and bool become int32, an int64 outside int32 is TEENY_ERR_RANGE; half
 * becomes fp32, exactly).
 *
 * The header dict is parsed by a small strict parser for exactly what
 * numpy writes: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * (keys in any order, single or double quotes). Anything else, a big-endian
 * or Fortran-order array, truncated or trailing data is TEENY_ERR_FORMAT.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../internal.h"

static const unsigned char NPY_MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
#define NPY_HEADER_MAX (1u << 20)

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* Reverse each size-byte word in place (big-endian hosts). */
static void swap_words(void *data, size_t n, size_t size)
{
    unsigned char *p = data;
    for (size_t i = 0; i < n; i++, p += size)
        for (size_t lo = 0, hi = size - 1; lo < hi; lo++, hi--) {
            unsigned char a = p[lo];
            p[lo] = p[hi];
            p[hi] = a;
        }
}

static void swap4(void *data, size_t n)
{
    swap_words(data, n, 4);
}

/* The descrs read, by teeny_npy_dtype, and their element sizes. */
static const char *const NPY_DESCR[] = {"<f4", "<i4", "<i8", "|b1", "<f2"};
static const size_t NPY_ELEM[] = {4, 4, 8, 1, 2};
_Static_assert(sizeof NPY_DESCR / sizeof *NPY_DESCR == TEENY_NPY_F16 + 1, "a descr per teeny_npy_dtype");

/* The file: preamble, header dict for descr and shape (ndim 0: "()"),
 * then bytes of little-endian data, through a temp file renamed over path. */
static teeny_status write_npy(teeny_ctx *ctx, const char *fn, const char *path, const char *descr, int ndim,
                              const int64_t *shape, const void *data, size_t bytes)
{
    char dict[256];
    unsigned char pre[10];
    size_t at, total;
    char *header;
    at = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++)
        at += (size_t)snprintf(dict + at, sizeof dict - at, "%lld,%s", (long long)shape[i], i + 1 < ndim ? " " : "");
    if (ndim > 1) /* "(3,)" for one dimension, "(2, 3)" otherwise */
        at--;
    at += (size_t)snprintf(dict + at, sizeof dict - at, "), }");
    total = (10 + at + 1 + 63) / 64 * 64; /* preamble + dict + '\n', padded */
    if (!(header = teeny__malloc(total - 10)))
        return teeny__error(ctx, TEENY_ERR_NOMEM, "%s %s: out of host memory", fn, path);
    memcpy(header, dict, at);
    memset(header + at, ' ', total - 10 - at - 1);
    header[total - 10 - 1] = '\n';
    memcpy(pre, NPY_MAGIC, 6);
    pre[6] = 1;
    pre[7] = 0;
    pre[8] = (unsigned char)((total - 10) & 0xff);
    pre[9] = (unsigned char)((total - 10) >> 8);
    const void *parts[3] = {pre, header, data};
    size_t lens[3] = {10, total - 10, bytes};
    teeny_status st = teeny__write_file_atomic(ctx, fn, path, parts, lens, 3);
    teeny__free(header);
    return st;
}

teeny_status teeny_npy_save(const teeny_tensor *t, const char *path)
{
    const char *fn = "teeny_npy_save";
    teeny_ctx *ctx;
    size_t n;
    void *data = NULL;
    teeny_status st;
    if (!t || !t->handle_alive)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: tensor is NULL or destroyed", fn);
    ctx = t->ctx;
    teeny__clear_error(ctx);
    if (!path)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: path is NULL", fn);
    n = (size_t)t->numel;
    if (!(data = teeny__malloc(n * 4)))
        return teeny__error(ctx, TEENY_ERR_NOMEM, "%s %s: out of host memory", fn, path);
    st = t->dtype == TEENY__F32 ? teeny_tensor_read(t, data, n) : teeny_tensor_read_i32(t, data, n);
    if (st == TEENY_OK) {
        if (!host_is_little_endian())
            swap4(data, n);
        st = write_npy(ctx, fn, path, t->dtype == TEENY__F32 ? "<f4" : "<i4", t->ndim, t->shape, data, n * 4);
    }
    teeny__free(data);
    return st;
}

teeny_status teeny_npy_write(teeny_ctx *ctx, const char *path, const teeny_npy_info *info, const void *data)
{
    const char *fn = "teeny_npy_write";
    int64_t numel = 1;
    if (!ctx)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: ctx is NULL", fn);
    teeny__clear_error(ctx);
    if (!path || !info || !data)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s is NULL", fn, !path ? "path" : !info ? "info" : "data");
    if ((int)info->dtype < 0 || (int)info->dtype >= (int)(sizeof NPY_DESCR / sizeof *NPY_DESCR))
        return teeny__error(ctx, TEENY_ERR_ARG, "%s %s: unknown dtype %d", fn, path, (int)info->dtype);
    if (info->ndim < 0 || info->ndim > TEENY_NPY_MAX_DIMS)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s %s: rank %d outside 0..%d", fn, path, info->ndim,
                            TEENY_NPY_MAX_DIMS);
    for (int i = 0; i < info->ndim; i++) {
        if (info->shape[i] < 1 || info->shape[i] > INT32_MAX || numel > INT32_MAX / info->shape[i])
            return teeny__error(ctx, TEENY_ERR_ARG, "%s %s: dimension %d is %lld (sizes 1.. with at most 2^31 - 1 "
                                "elements)", fn, path, i, (long long)info->shape[i]);
        numel *= info->shape[i];
    }
    size_t elem = NPY_ELEM[info->dtype], bytes = (size_t)numel * elem;
    if (host_is_little_endian() || elem == 1)
        return write_npy(ctx, fn, path, NPY_DESCR[info->dtype], info->ndim, info->shape, data, bytes);
    void *le = teeny__malloc(bytes);
    if (!le)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "%s %s: out of host memory", fn, path);
    memcpy(le, data, bytes);
    swap_words(le, (size_t)numel, elem);
    teeny_status st = write_npy(ctx, fn, path, NPY_DESCR[info->dtype], info->ndim, info->shape, le, bytes);
    teeny__free(le);
    return st;
}

/* ---- header dict parser ---- */

typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static int eat(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted string into buf (no escapes: numpy's keys and descrs have none). */
static int parse_str(cursor *c, char *buf, size_t cap)
{
    char q;
    size_t n = 0;
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return 0;
    q = *c->p++;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap)
            return 0;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return 0;
    c->p++;
    buf[n] = '\0';
    return 1;
}

static int parse_word(cursor *c, const char *w)
{
    size_t n = strlen(w);
    skip_ws(c);
    if ((size_t)(c->end - c->p) >= n && !memcmp(c->p, w, n)) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* "(d0, d1, ...)" with an optional trailing comma; at most max dims. */
static int parse_shape(cursor *c, int64_t *shape, int *ndim, int max)
{
    *ndim = 0;
    if (!eat(c, '('))
        return 0;
    for (;;) {
        int64_t v = 0;
        int digits = 0;
        if (eat(c, ')'))
            return 1;
        skip_ws(c);
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return 0;
            v = v * 10 + (*c->p++ - '0');
            digits++;
        }
        if (!digits || *ndim >= max)
            return 0;
        shape[(*ndim)++] = v;
        if (!eat(c, ','))
            return eat(c, ')');
    }
}

#define NPY_PARSE_DIMS 32
_Static_assert(TEENY_NPY_MAX_DIMS == TEENY_MAX_DIMS, "an .npy array is at most a tensor's rank");

static teeny_status parse_dict(teeny_ctx *ctx, const char *path, const char *h, size_t len,
                               teeny_npy_dtype *dtype, int *ndim, int64_t *shape)
{
    cursor c = {h, h + len};
    int have_descr = 0, have_order = 0, have_shape = 0;
    char key[32], descr[16];
    if (!eat(&c, '{'))
        return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: header is not a dict", path);
    while (!eat(&c, '}')) {
        if (!parse_str(&c, key, sizeof key) || !eat(&c, ':'))
            return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: malformed header dict", path);
        if (!strcmp(key, "descr") && !have_descr++) {
            if (!parse_str(&c, descr, sizeof descr))
                return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: malformed descr", path);
            int known = -1;
            for (int k = 0; k < (int)(sizeof NPY_DESCR / sizeof *NPY_DESCR) && known < 0; k++)
                if (!strcmp(descr, NPY_DESCR[k]) || (k == TEENY_NPY_BOOL && !strcmp(descr, "<b1")))
                    known = k;
            if (known < 0)
                return teeny__error(ctx, TEENY_ERR_FORMAT,
                                    "npy %s: dtype '%s' is not supported ('<f4', '<i4', '<i8', '|b1', '<f2'%s)", path,
                                    descr, descr[0] == '>' ? "; big-endian data is not read" : "");
            *dtype = (teeny_npy_dtype)known;
        } else if (!strcmp(key, "fortran_order") && !have_order++) {
            if (parse_word(&c, "True"))
                return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: Fortran-order arrays are not supported", path);
            if (!parse_word(&c, "False"))
                return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: malformed fortran_order", path);
        } else if (!strcmp(key, "shape") && !have_shape++) {
            if (!parse_shape(&c, shape, ndim, NPY_PARSE_DIMS))
                return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: malformed shape", path);
        } else {
            return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: unexpected or repeated key '%s'", path, key);
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}'))
                return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: malformed header dict", path);
            break;
        }
    }
    while (c.p < c.end && (*c.p == ' ' || *c.p == '\n' || *c.p == '\t'))
        c.p++;
    if (c.p != c.end)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: unexpected text after the header dict", path);
    if (!have_descr || !have_order || !have_shape)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: header lacks %s", path,
                            !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    return TEENY_OK;
}

/* Opens path (a regular file) for reading; *size is its size. */
static teeny_status npy_open(teeny_ctx *ctx, const char *path, FILE **fp, off_t *size)
{
    struct stat sb;
    const char *why;
    int fd = teeny__open_regular(path, &why);
    if (fd < 0)
        return teeny__error(ctx, TEENY_ERR_IO, "npy %s: cannot open: %s", path, why);
    if (fstat(fd, &sb) != 0 || !(*fp = fdopen(fd, "rb"))) {
        close(fd);
        return teeny__error(ctx, TEENY_ERR_IO, "npy %s: cannot open: %s", path, strerror(errno));
    }
    *size = sb.st_size;
    return TEENY_OK;
}

/* The preamble (magic, version, header length) and the header bytes,
 * their sizes checked against the file's before allocating. On success
 * *h (hlen bytes, caller frees) holds the header dict. */
static teeny_status read_header(teeny_ctx *ctx, const char *path, FILE *fp, off_t size, size_t *pre_len_out,
                                size_t *hlen_out, char **h_out)
{
    unsigned char pre[12];
    size_t hlen, pre_len, got;
    char *h;
    got = fread(pre, 1, 10, fp);
    if (got < 8 || memcmp(pre, NPY_MAGIC, 6))
        return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: not an .npy file (bad magic)", path);
    if (pre[6] < 1 || pre[6] > 3 || pre[7] != 0)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: version %d.%d is not supported (1.0 to 3.0)", path,
                            pre[6], pre[7]);
    pre_len = pre[6] == 1 ? 10 : 12;
    if (pre_len == 12 && got == 10)
        got += fread(pre + 10, 1, 2, fp);
    if (got < pre_len)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: truncated preamble", path);
    hlen = pre_len == 10 ? (size_t)pre[8] | (size_t)pre[9] << 8
                         : (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    if (hlen == 0 || hlen > NPY_HEADER_MAX)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: header length %zu is invalid", path, hlen);
    if ((uint64_t)hlen > (uint64_t)size - pre_len) /* sizes are checked before allocating */
        return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: truncated header (%zu bytes declared, file has %lld)",
                            path, hlen, (long long)size);
    h = teeny__malloc(hlen);
    if (!h)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "npy %s: out of host memory", path);
    if (fread(h, 1, hlen, fp) != hlen) {
        teeny__free(h);
        return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: truncated header", path);
    }
    *pre_len_out = pre_len;
    *hlen_out = hlen;
    *h_out = h;
    return TEENY_OK;
}

/* The shape's element count (*numel), the rank limit, and the data
 * section's size against the file's (size bytes, of which pre_len + hlen
 * are preamble and header). */
static teeny_status check_sizes(teeny_ctx *ctx, const char *path, int ndim, const int64_t *shape, size_t elem,
                                off_t size, size_t pre_len, size_t hlen, int64_t *numel_out)
{
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0)
            return teeny__error(ctx, TEENY_ERR_UNSUPPORTED,
                                "npy %s: empty arrays (size 0 on axis %d) are not supported", path, i);
        if (shape[i] > INT32_MAX || numel > INT32_MAX / shape[i])
            return teeny__error(ctx, TEENY_ERR_RANGE, "npy %s: more than 2^31 - 1 elements", path);
        numel *= shape[i];
    }
    if (ndim > TEENY_MAX_DIMS)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "npy %s: %d dimensions; tensors have at most %d", path, ndim,
                            TEENY_MAX_DIMS);
    if ((uint64_t)numel * elem != (uint64_t)size - pre_len - hlen)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: %s: the header declares %lld bytes of data, the file holds %lld",
                            path, (uint64_t)numel * elem > (uint64_t)size - pre_len - hlen ? "truncated data" : "trailing bytes after the array data",
                            (long long)numel * (long long)elem, (long long)(size - (off_t)pre_len - (off_t)hlen));
    *numel_out = numel;
    return TEENY_OK;
}

/* numel elements of elem bytes, then end of file; *data (caller frees) is
 * in host byte order, a bool's bytes checked to be 0 or 1. */
static teeny_status read_data(teeny_ctx *ctx, const char *path, FILE *fp, int64_t numel, teeny_npy_dtype dtype,
                              void **data_out)
{
    size_t elem = NPY_ELEM[dtype], bytes = (size_t)numel * elem, got;
    unsigned char *data = teeny__malloc(bytes);
    teeny_status st = TEENY_OK;
    if (!data)
        return teeny__error(ctx, TEENY_ERR_NOMEM, "npy %s: out of host memory", path);
    got = fread(data, 1, bytes, fp);
    if (got != bytes)
        st = teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: truncated data: %zu of %zu bytes", path, got, bytes);
    else if (fgetc(fp) != EOF)
        st = teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: trailing bytes after the array data", path);
    for (size_t i = 0; st == TEENY_OK && dtype == TEENY_NPY_BOOL && i < bytes; i++)
        if (data[i] > 1)
            st = teeny__error(ctx, TEENY_ERR_FORMAT, "npy %s: bool element %zu is byte %u (a bool is 0 or 1)", path, i,
                              data[i]);
    if (st != TEENY_OK) {
        teeny__free(data);
        return st;
    }
    if (!host_is_little_endian() && elem > 1)
        swap_words(data, (size_t)numel, elem);
    *data_out = data;
    return TEENY_OK;
}

/* The file's header into *info and, with data_out, its data (caller frees). */
static teeny_status npy_read_file(teeny_ctx *ctx, const char *path, teeny_npy_info *info, void **data_out)
{
    FILE *fp = NULL;
    char *h = NULL;
    size_t hlen = 0, pre_len = 0;
    off_t size = 0;
    int ndim = 0;
    int64_t shape[NPY_PARSE_DIMS], numel = 1;
    teeny_npy_dtype dtype = TEENY_NPY_F32;
    teeny_status st;
    if ((st = npy_open(ctx, path, &fp, &size)) != TEENY_OK)
        return st;
    if ((st = read_header(ctx, path, fp, size, &pre_len, &hlen, &h)) == TEENY_OK &&
        (st = parse_dict(ctx, path, h, hlen, &dtype, &ndim, shape)) == TEENY_OK &&
        (st = check_sizes(ctx, path, ndim, shape, NPY_ELEM[dtype], size, pre_len, hlen, &numel)) == TEENY_OK &&
        (!data_out || (st = read_data(ctx, path, fp, numel, dtype, data_out)) == TEENY_OK)) {
        memset(info, 0, sizeof *info);
        info->dtype = dtype;
        info->ndim = ndim;
        memcpy(info->shape, shape, (size_t)ndim * sizeof *shape);
        info->numel = numel;
        info->bytes = (size_t)numel * NPY_ELEM[dtype];
    }
    teeny__free(h);
    fclose(fp);
    return st;
}

teeny_status teeny_npy_read(teeny_ctx *ctx, const char *path, teeny_npy_info *info, void *dst, size_t dst_bytes)
{
    const char *fn = "teeny_npy_read";
    teeny_npy_info got;
    void *data = NULL;
    teeny_status st;
    if (!ctx)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: ctx is NULL", fn);
    teeny__clear_error(ctx);
    if (!path || !info)
        return teeny__error(ctx, TEENY_ERR_ARG, "%s: %s is NULL", fn, !path ? "path" : "info");
    if ((st = npy_read_file(ctx, path, &got, dst ? &data : NULL)) != TEENY_OK)
        return st;
    if (dst && dst_bytes < got.bytes) {
        st = teeny__error(ctx, TEENY_ERR_ARG, "%s %s: dst holds %zu bytes, the data %zu (%s, %lld elements)", fn, path,
                          dst_bytes, got.bytes, NPY_DESCR[got.dtype], (long long)got.numel);
    } else {
        if (dst)
            memcpy(dst, data, got.bytes);
        *info = got;
    }
    teeny__free(data);
    return st;
}

/* int64 or bool values as int32 (an int64 outside int32: TEENY_ERR_RANGE). */
static teeny_status to_int32(teeny_ctx *ctx, const char *path, const teeny_npy_info *info, const void *data,
                             int32_t *dst)
{
    for (int64_t i = 0; i < info->numel; i++) {
        int64_t v = info->dtype == TEENY_NPY_I64 ? ((const int64_t *)data)[i] : ((const unsigned char *)data)[i];
        if (v < INT32_MIN || v > INT32_MAX)
            return teeny__error(ctx, TEENY_ERR_RANGE,
                                "npy %s: int64 element %lld is %lld, outside int32 (tensors hold int32)", path,
                                (long long)i, (long long)v);
        dst[i] = (int32_t)v;
    }
    return TEENY_OK;
}

teeny_status teeny_npy_load(teeny_ctx *ctx, const char *path, teeny_tensor **out)
{
    void *data = NULL;
    int32_t *narrowed = NULL;
    int64_t one = 1;
    teeny_npy_info info;
    teeny_tensor *t = NULL;
    teeny_status st = TEENY_OK;
    if (out)
        *out = NULL;
    if (!ctx)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_npy_load: ctx is NULL");
    teeny__clear_error(ctx);
    if (!path || !out)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_npy_load: %s is NULL", !path ? "path" : "out");
    if ((st = npy_read_file(ctx, path, &info, &data)) != TEENY_OK)
        goto cleanup;
    if (info.dtype == TEENY_NPY_I64 || info.dtype == TEENY_NPY_BOOL) {
        if (!(narrowed = teeny__malloc((size_t)info.numel * sizeof *narrowed))) {
            st = teeny__error(ctx, TEENY_ERR_NOMEM, "npy %s: out of host memory", path);
            goto cleanup;
        }
        if ((st = to_int32(ctx, path, &info, data, narrowed)) != TEENY_OK)
            goto cleanup;
    }
    if (info.dtype == TEENY_NPY_F16) { /* exactly, into the fp32 tensor */
        float *wide = teeny__malloc((size_t)info.numel * sizeof *wide);
        if (!wide) {
            st = teeny__error(ctx, TEENY_ERR_NOMEM, "npy %s: out of host memory", path);
            goto cleanup;
        }
        teeny_half_to_float(data, wide, (size_t)info.numel);
        teeny__free(data);
        data = wide;
    }
    int is_f32 = info.dtype == TEENY_NPY_F32 || info.dtype == TEENY_NPY_F16, ndim = info.ndim ? info.ndim : 1;
    const int64_t *shape = info.ndim ? info.shape : &one;
    st = is_f32 ? teeny_tensor_create(ctx, ndim, shape, &t) : teeny_tensor_create_i32(ctx, ndim, shape, &t);
    if (st == TEENY_OK)
        st = is_f32 ? teeny_tensor_write(t, data, (size_t)info.numel)
                    : teeny_tensor_write_i32(t, narrowed ? narrowed : data, (size_t)info.numel);
    if (st == TEENY_OK) {
        *out = t;
        t = NULL;
    }
cleanup:
    teeny_tensor_destroy(t);
    teeny__free(narrowed);
    teeny__free(data);
    return st;
}
