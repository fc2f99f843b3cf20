/*
 * tensor_proto.c -- ONNX TensorProtos (initializers, Constant values, test data)
 * and caller feeds into host constants: fp32 stays fp32, float16 becomes
 * fp32 exactly (int32_data holds its 16-bit patterns, raw data its
 * little-endian halves; subnormals, inf and NaN kept; onnx_type stays
 * FLOAT16), every integer and boolean type becomes int64; other types are
 * unsupported. Every count is
 * checked against the dimensions (which are checked first: non-negative,
 * at most OX_MAX_DIMS of them, at most OX_MAX_ELEMS elements). Raw data is
 * little-endian whatever the host. External data is read from a file
 * beside the model: the location must be relative, without "..", and
 * resolve (symlinks followed) inside the model's directory; offset and
 * length must lie inside the file and match the tensor's size. Folded
 * values are allocated here too, within the folding budget
 * (teenycl_onnx.h) that the model's own tensors widen.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_internal.h"

void teeny__ox_const_free(ox_const *c)
{
    teeny__free(c->data);
    c->data = NULL;
    c->numel = 0;
}

int64_t teeny__ox_numel(const ox_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) {
        if (s->d[i] < 0 || (s->d[i] > 0 && n > OX_MAX_ELEMS / s->d[i]))
            return -1;
        n *= s->d[i];
    }
    return n;
}

const char *teeny__ox_type_name(int t)
{
    static const char *names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64",
                                  "string", "bool", "float16", "double", "uint32", "uint64", "complex64",
                                  "complex128", "bfloat16"};
    return t >= 0 && t < (int)(sizeof names / sizeof *names) ? names[t] : "an unknown type";
}

/* Bytes per element in raw data, 0 for a type we do not take. */
static int raw_size(int t)
{
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return 1;
    default: return 0;
    }
}

int teeny__ox_type_supported(int t)
{
    return raw_size(t) != 0;
}

int teeny__ox_is_float(int t)
{
    return t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
}

/* c's type and shape, no data yet: TEENY_ERR_RANGE past OX_MAX_ELEMS. */
static teeny_status const_shape(teeny_ctx *ctx, ox_type type, int onnx_type, const ox_shape *s, ox_const *c)
{
    int64_t n = teeny__ox_numel(s);
    memset(c, 0, sizeof *c);
    c->type = type;
    c->onnx_type = onnx_type;
    c->shape = *s;
    if (n < 0)
        return teeny__error(ctx, TEENY_ERR_RANGE, "a tensor of more than %d elements", OX_MAX_ELEMS);
    c->numel = n;
    return TEENY_OK;
}

size_t teeny__ox_esize(ox_type t)
{
    return t == OX_F32 ? 4 : 8;
}

/* The host bytes c's data takes (numel <= OX_MAX_ELEMS: no overflow). */
static int64_t const_bytes(const ox_const *c)
{
    return c->numel * (int64_t)teeny__ox_esize(c->type);
}

/* c's data (zeros): once what fills it is known to hold numel values. */
static teeny_status const_data(teeny_ctx *ctx, ox_const *c)
{
    if (c->numel && !(c->data = teeny__calloc((size_t)c->numel, teeny__ox_esize(c->type))))
        return teeny__error(ctx, TEENY_ERR_NOMEM, "out of host memory for a tensor of %lld elements",
                            (long long)c->numel);
    return TEENY_OK;
}

void teeny__ox_const_held(ox_import *im, const ox_const *c)
{
    int64_t bytes = const_bytes(c);
    im->model_bytes += bytes;
    if (bytes > im->model_largest)
        im->model_largest = bytes;
}

/* The folding budget (teenycl_onnx.h), checked before c's data exists. */
static teeny_status fold_budget(ox_import *im, const ox_const *c)
{
    char dims[160];
    int64_t bytes = const_bytes(c), value_cap = im->budget.value_bytes, total_cap = im->budget.total_bytes;
    int64_t value_max = value_cap > im->model_largest ? value_cap : im->model_largest;
    int64_t total_max = total_cap > INT64_MAX - 2 * im->model_bytes ? INT64_MAX : total_cap + 2 * im->model_bytes;
    teeny__dims_str(c->shape.d, c->shape.ndim, dims, sizeof dims);
    if (bytes > value_max)
        return teeny__error(im->ctx, TEENY_ERR_NOMEM, "a folded value of shape %s (%s, %lld bytes) is over the "
                            "folding budget for one value, %lld bytes (TEENY_ONNX_FOLD_VALUE_BYTES, or the model's "
                            "largest tensor)", dims,
                            teeny__ox_type_name(c->onnx_type), (long long)bytes, (long long)value_max);
    if (bytes > total_max - im->folded_bytes)
        return teeny__error(im->ctx, TEENY_ERR_NOMEM, "a folded value of shape %s (%lld bytes) would take the folded "
                            "values past the folding budget for all of them, %lld bytes (%lld taken; "
                            "TEENY_ONNX_FOLD_TOTAL_BYTES plus twice the model's own tensors)", dims, (long long)bytes, (long long)total_max,
                            (long long)im->folded_bytes);
    return TEENY_OK;
}

teeny_status teeny__ox_const_alloc(ox_import *im, ox_type type, int onnx_type, const ox_shape *s, ox_const *c)
{
    teeny_status st = const_shape(im->ctx, type, onnx_type, s, c);
    if (st != TEENY_OK || (st = fold_budget(im, c)) != TEENY_OK || (st = const_data(im->ctx, c)) != TEENY_OK)
        return st;
    im->folded_bytes += const_bytes(c);
    return TEENY_OK;
}

double teeny__ox_get_f(const ox_const *c, int64_t i)
{
    return c->type == OX_F32 ? (double)((const float *)c->data)[i] : (double)((const int64_t *)c->data)[i];
}

int64_t teeny__ox_get_i(const ox_const *c, int64_t i)
{
    return c->type == OX_I64 ? ((const int64_t *)c->data)[i] : (int64_t)((const float *)c->data)[i];
}

/* Little-endian element i of raw bytes as the constant's type; 0 for a
 * uint64 past int64. */
static int decode_raw(const uint8_t *b, int t, int64_t i, ox_const *c)
{
    int size = raw_size(t);
    uint64_t u = 0;
    for (int k = size - 1; k >= 0; k--)
        u = (u << 8) | b[i * size + k];
    if (c->type == OX_F32 && t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16) {
        ((float *)c->data)[i] = teeny__half_to_f32((uint16_t)u);
        return 1;
    }
    if (c->type == OX_F32) {
        uint32_t bits = (uint32_t)u;
        memcpy(&((float *)c->data)[i], &bits, 4);
        return 1;
    }
    int64_t v;
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: v = (int32_t)(uint32_t)u; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: v = (int16_t)(uint16_t)u; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: v = (int8_t)(uint8_t)u; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: v = u != 0; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
        if (u > (uint64_t)INT64_MAX)
            return 0;
        v = (int64_t)u;
        break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: v = (int64_t)u; break;
    default: v = (int64_t)u; break; /* uint8, uint16, uint32 */
    }
    ((int64_t *)c->data)[i] = v;
    return 1;
}

static teeny_status from_raw(teeny_ctx *ctx, const uint8_t *b, size_t len, const char *what, ox_const *c)
{
    int size = raw_size(c->onnx_type);
    if (len != (size_t)c->numel * (size_t)size)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: %zu bytes of data for %lld %s elements", what, len,
                            (long long)c->numel, teeny__ox_type_name(c->onnx_type));
    for (int64_t i = 0; i < c->numel; i++)
        if (!decode_raw(b, c->onnx_type, i, c))
            return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "%s: a uint64 value past int64", what);
    return TEENY_OK;
}

/* How many values the typed repeated field of type tp holds. */
static size_t field_count(const Onnx__TensorProto *t, int tp)
{
    if (tp == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return t->n_float_data;
    if (tp == ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
        return t->n_int64_data;
    if (tp == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32 || tp == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64)
        return t->n_uint64_data;
    return t->n_int32_data;
}

/* The typed repeated field the type stores its values in. */
static teeny_status from_fields(teeny_ctx *ctx, const Onnx__TensorProto *t, const char *what, ox_const *c)
{
    int tp = c->onnx_type;
    size_t n = field_count(t, tp);
    if (n != (size_t)c->numel)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: %zu values for %lld %s elements", what, n,
                            (long long)c->numel, teeny__ox_type_name(tp));
    for (int64_t i = 0; i < c->numel; i++) {
        if (tp == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
            ((float *)c->data)[i] = t->float_data[i];
        else if (tp == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16) /* the bits in the low 16 of an int32 */
            ((float *)c->data)[i] = teeny__half_to_f32((uint16_t)(t->int32_data[i] & 0xffff));
        else if (tp == ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
            ((int64_t *)c->data)[i] = t->int64_data[i];
        else if (tp == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32 || tp == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64) {
            if (t->uint64_data[i] > (uint64_t)INT64_MAX)
                return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "%s: a uint64 value past int64", what);
            ((int64_t *)c->data)[i] = (int64_t)t->uint64_data[i];
        } else if (tp == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL)
            ((int64_t *)c->data)[i] = t->int32_data[i] != 0;
        else
            ((int64_t *)c->data)[i] = t->int32_data[i];
    }
    return TEENY_OK;
}

/* Whether location stays inside dir: relative, no ".." component, and its
 * resolved path under dir's. */
static teeny_status check_location(teeny_ctx *ctx, const char *dir, const char *loc, const char *what, char *path,
                                   size_t cap)
{
    char real_dir[PATH_MAX], *real_file;
    if (!*loc || loc[0] == '/')
        return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: external data location \"%s\" is %s", what, loc,
                            *loc ? "an absolute path" : "empty");
    for (const char *s = loc; *s;) {
        size_t len = strcspn(s, "/");
        if (len == 2 && s[0] == '.' && s[1] == '.')
            return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: external data location \"%s\" leaves the model's "
                                "directory (\"..\")", what, loc);
        s += len + (s[len] == '/');
    }
    if ((size_t)snprintf(path, cap, "%s/%s", dir, loc) >= cap)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: external data path too long", what);
    if (!realpath(dir, real_dir))
        return teeny__error(ctx, TEENY_ERR_IO, "%s: model directory %s: %s", what, dir, strerror(errno));
    if (!(real_file = realpath(path, NULL)))
        return teeny__error(ctx, TEENY_ERR_IO, "%s: external data file %s: %s", what, path, strerror(errno));
    size_t n = strlen(real_dir);
    int inside = !strncmp(real_file, real_dir, n) && (real_file[n] == '/' || (n == 1 && real_dir[0] == '/'));
    free(real_file); /* realpath's own malloc */
    if (!inside)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: external data file %s resolves outside the model's "
                            "directory %s", what, loc, real_dir);
    return TEENY_OK;
}

static teeny_status external_keys(teeny_ctx *ctx, const Onnx__TensorProto *t, const char *what, const char **loc,
                                  int64_t *offset, int64_t *length)
{
    *loc = NULL;
    *offset = 0;
    *length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const char *k = t->external_data[i]->key ? t->external_data[i]->key : "";
        const char *v = t->external_data[i]->value ? t->external_data[i]->value : "";
        char *end;
        if (!strcmp(k, "location")) {
            *loc = v;
        } else if (!strcmp(k, "offset") || !strcmp(k, "length")) {
            errno = 0;
            long long x = strtoll(v, &end, 10);
            if (!*v || *end || errno || x < 0)
                return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: external data %s \"%s\" is not a count", what, k, v);
            *(!strcmp(k, "offset") ? offset : length) = x;
        } else if (strcmp(k, "checksum")) {
            return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: unknown external data key \"%s\"", what, k);
        }
    }
    if (!*loc)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: external data without a location", what);
    return TEENY_OK;
}

static teeny_status from_external(teeny_ctx *ctx, const Onnx__TensorProto *t, const char *dir, const char *what,
                                  ox_const *c)
{
    const char *loc, *why = "";
    int64_t offset, length, want = c->numel * raw_size(c->onnx_type);
    char path[PATH_MAX];
    struct stat sb;
    teeny_status st = external_keys(ctx, t, what, &loc, &offset, &length);
    if (st != TEENY_OK)
        return st;
    if (!dir)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "%s: external data (%s) but no directory to read it from "
                            "(teeny_onnx_params.base_dir)", what, loc);
    if ((st = check_location(ctx, dir, loc, what, path, sizeof path)) != TEENY_OK)
        return st;
    int fd = teeny__open_regular(path, &why);
    if (fd < 0)
        return teeny__error(ctx, TEENY_ERR_IO, "%s: external data file %s: %s", what, path, why);
    if (fstat(fd, &sb) != 0 || (length >= 0 && length != want)) {
        close(fd);
        return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: external data length %lld, the tensor needs %lld bytes", what,
                            (long long)length, (long long)want);
    }
    if (offset > (int64_t)sb.st_size || want > (int64_t)sb.st_size - offset) {
        close(fd);
        return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: %lld bytes at offset %lld pass the end of %s (%lld bytes)",
                            what, (long long)want, (long long)offset, loc, (long long)sb.st_size);
    }
    if ((st = const_data(ctx, c)) != TEENY_OK) { /* the file holds the data: now its room */
        close(fd);
        return st;
    }
    uint8_t *buf = teeny__malloc(want ? (size_t)want : 1);
    size_t got = 0;
    while (buf && got < (size_t)want) {
        ssize_t r = pread(fd, buf + got, (size_t)want - got, (off_t)(offset + (int64_t)got));
        if (r <= 0 && !(r < 0 && errno == EINTR))
            break;
        got += r > 0 ? (size_t)r : 0;
    }
    close(fd);
    if (!buf || got != (size_t)want) {
        teeny__free(buf);
        return teeny__error(ctx, buf ? TEENY_ERR_IO : TEENY_ERR_NOMEM, "%s: reading %s failed", what, path);
    }
    st = from_raw(ctx, buf, (size_t)want, what, c);
    teeny__free(buf);
    return st;
}

teeny_status teeny__ox_tensor_load(teeny_ctx *ctx, const Onnx__TensorProto *t, const char *dir, const char *what,
                            ox_const *c)
{
    ox_shape s = {0};
    int tp = t->has_data_type ? t->data_type : 0;
    teeny_status st;
    memset(c, 0, sizeof *c);
    if (t->n_dims > OX_MAX_DIMS)
        return teeny__error(ctx, TEENY_ERR_SHAPE, "%s: rank %zu (at most %d)", what, t->n_dims, OX_MAX_DIMS);
    s.ndim = (int)t->n_dims;
    for (int i = 0; i < s.ndim; i++)
        s.d[i] = t->dims[i];
    for (int i = 0; i < s.ndim; i++)
        if (s.d[i] < 0)
            return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: dimension %d is %lld", what, i, (long long)s.d[i]);
    if (!raw_size(tp))
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "%s: element type %s (%d) is not supported", what,
                            teeny__ox_type_name(tp), tp);
    if (t->segment)
        return teeny__error(ctx, TEENY_ERR_UNSUPPORTED, "%s: segmented tensors are not supported", what);
    /* the data must hold the dimensions' values before their room is allocated (a few bytes of model
     * must not claim gigabytes): external data once its file's size is known (from_external), the
     * rest here */
    if ((st = const_shape(ctx, teeny__ox_is_float(tp) ? OX_F32 : OX_I64, tp, &s, c)) != TEENY_OK)
        return teeny__error(ctx, st, "%s: %s", what, teeny_last_error(ctx));
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        st = from_external(ctx, t, dir, what, c);
    } else {
        size_t size = (size_t)raw_size(tp), have = t->has_raw_data ? t->raw_data.len / size : field_count(t, tp);
        if (have != (size_t)c->numel || (t->has_raw_data && t->raw_data.len % size))
            return teeny__error(ctx, TEENY_ERR_FORMAT, "%s: the data holds %zu %s for %lld %s elements", what,
                                t->has_raw_data ? t->raw_data.len : have, t->has_raw_data ? "bytes" : "values",
                                (long long)c->numel, teeny__ox_type_name(tp));
        if ((st = const_data(ctx, c)) == TEENY_OK)
            st = t->has_raw_data ? from_raw(ctx, t->raw_data.data, t->raw_data.len, what, c)
                                 : from_fields(ctx, t, what, c);
    }
    if (st != TEENY_OK)
        teeny__ox_const_free(c);
    return st;
}

teeny_status teeny__ox_feed_load(teeny_ctx *ctx, const teeny_onnx_feed *f, ox_const *c)
{
    ox_shape s = {0};
    teeny_status st;
    memset(c, 0, sizeof *c);
    if (f->ndim < 0 || f->ndim > OX_MAX_DIMS || (f->ndim && !f->shape))
        return teeny__error(ctx, TEENY_ERR_ARG, "feed %s: rank %d outside 0..%d or shape NULL", f->name, f->ndim,
                            OX_MAX_DIMS);
    if (f->dtype != TEENY_ONNX_FLOAT && f->dtype != TEENY_ONNX_FLOAT16 && f->dtype != TEENY_ONNX_INT32 &&
        f->dtype != TEENY_ONNX_INT64)
        return teeny__error(ctx, TEENY_ERR_ARG, "feed %s: dtype %d is not FLOAT, FLOAT16, INT32 or INT64", f->name,
                            (int)f->dtype);
    s.ndim = f->ndim;
    for (int i = 0; i < s.ndim; i++)
        if ((s.d[i] = f->shape[i]) < 0)
            return teeny__error(ctx, TEENY_ERR_ARG, "feed %s: dimension %d is %lld", f->name, i, (long long)s.d[i]);
    ox_type held = teeny__ox_is_float((int)f->dtype) ? OX_F32 : OX_I64;
    if ((st = const_shape(ctx, held, (int)f->dtype, &s, c)) != TEENY_OK ||
        (st = const_data(ctx, c)) != TEENY_OK) /* the caller's own data: not folded */
        return st;
    if (c->numel && !f->data) {
        teeny__ox_const_free(c);
        return teeny__error(ctx, TEENY_ERR_ARG, "feed %s: data is NULL", f->name);
    }
    for (int64_t i = 0; i < c->numel; i++) {
        if (f->dtype == TEENY_ONNX_FLOAT)
            ((float *)c->data)[i] = ((const float *)f->data)[i];
        else if (f->dtype == TEENY_ONNX_FLOAT16)
            ((float *)c->data)[i] = teeny__half_to_f32(((const uint16_t *)f->data)[i]);
        else
            ((int64_t *)c->data)[i] =
                f->dtype == TEENY_ONNX_INT32 ? ((const int32_t *)f->data)[i] : ((const int64_t *)f->data)[i];
    }
    return TEENY_OK;
}
