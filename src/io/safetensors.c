/*
 * safetensors.c -- the safetensors file format (Hugging Face): a writer for
 * named device tensors (F32) and host int64 values (I64) with string
 * metadata, and a reader that validates a whole file in host memory before
 * any tensor is handed out.
 *
 * Layout: [u64 little-endian N][N bytes of JSON header][data section].
 * The header maps each tensor name to {"dtype", "shape", "data_offsets":
 * [begin, end)} (byte offsets into the data section) and may hold
 * "__metadata__", an object of strings. The writer pads the header with
 * spaces to a multiple of 8 and packs tensors in the order added, so files
 * load in Python's safetensors (which requires contiguous, non-overlapping
 * data). It adds two metadata entries the reader verifies when present:
 *   teenycl_checksum         FNV-1a 64 of the data section, 16 hex digits
 *   teenycl_header_checksum  FNV-1a 64 of the padded header bytes with this
 *                            entry's 16 digits replaced by '0'
 * so a flipped byte anywhere (bar the two key names) is caught. The header
 * JSON is parsed with cJSON; every number, size and offset is checked
 * before use, and every string must be text a C string holds whole: the
 * header valid UTF-8 (as the format requires), no NUL character in a
 * string (cJSON would cut "F32\u0000xx" to F32), no empty tensor name
 * (which the writer refuses). Files are written crash-safely through io/file.c.
 *
 * This file holds the reader (teeny_st_open and the lookups); the writer
 * is safetensors_write.c, the shared keys and helpers are in
 * safetensors_internal.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "safetensors_internal.h"

/* ---- reader ---- */

typedef struct {
    const char *name; /* into the cJSON tree's strings, copied */
    int is_i64;
    int ndim;
    int64_t shape[TEENY_ST_MAX_DIMS];
    uint64_t begin, end, numel;
} st_tensor;

struct teeny_st_file {
    char *path;
    unsigned char *buf; /* the whole file */
    size_t size;
    const unsigned char *data;
    uint64_t data_len;
    st_tensor *t;
    int n;
    char **names;       /* owned copies, per tensor */
    const st_tensor **by_name; /* t sorted by name, for lookups */
    char **meta_keys, **meta_values;
    int n_meta;
};

/* The uniform destructor name; teeny_st_close is its deprecated alias. */
void teeny_st_file_destroy(teeny_st_file *f)
{
    teeny_st_close(f);
}

void teeny_st_close(teeny_st_file *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n; i++)
        teeny__free(f->names[i]);
    for (int i = 0; i < f->n_meta; i++) {
        teeny__free(f->meta_keys[i]);
        teeny__free(f->meta_values[i]);
    }
    TEENY__FREE_ALL(f->names, f->by_name, f->meta_keys, f->meta_values, f->t, f->buf, f->path, f);
}

/* A JSON number that is an integer in [0, 2^53]. */
static int json_uint(const cJSON *x, uint64_t *out)
{
    double d;
    if (!cJSON_IsNumber(x))
        return 0;
    d = x->valuedouble;
    if (!(d >= 0 && d <= (double)ST_MAX_OFFSET) || d != (double)(uint64_t)d)
        return 0;
    *out = (uint64_t)d;
    return 1;
}

#define BAD(...) (st = teeny__error(NULL, TEENY_ERR_FORMAT, __VA_ARGS__))

static teeny_status read_whole(const char *path, teeny_st_file *f)
{
    char msg[256];
    teeny_status st = teeny__read_file(path, &f->buf, &f->size, msg, sizeof msg);
    return st == TEENY_OK ? st : teeny__error(NULL, st, "safetensors %s: %s", path, msg);
}

/* Verify teenycl_header_checksum: the header bytes with its digits zeroed. */
static teeny_status check_header_sum(const char *path, const unsigned char *header, size_t hlen, const char *want)
{
    teeny_status st = TEENY_OK;
    size_t plen = strlen(HEADER_CHECKSUM_PATTERN), at = SIZE_MAX;
    char hex[17];
    uint64_t h;
    for (size_t i = 0; i + plen + 16 <= hlen; i++)
        if (!memcmp(header + i, HEADER_CHECKSUM_PATTERN, plen)) {
            if (at != SIZE_MAX)
                return BAD("safetensors %s: the header checksum appears twice", path);
            at = i + plen;
        }
    if (at == SIZE_MAX || strlen(want) != 16 || memcmp(header + at, want, 16))
        return BAD("safetensors %s: header checksum entry is malformed", path);
    h = teeny__fnv1a64(TEENY__FNV_BASIS, header, at);
    h = teeny__fnv1a64(h, (const unsigned char *)"0000000000000000", 16);
    h = teeny__fnv1a64(h, header + at + 16, hlen - at - 16);
    snprintf(hex, sizeof hex, "%016" PRIx64, h);
    if (strcmp(hex, want))
        return BAD("safetensors %s: header checksum mismatch (stored %s, computed %s): the header is corrupt", path,
                   want, hex);
    return st;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

/* f->by_name: the tensors sorted by name; a name twice is a format error
 * (sorting keeps this linear-log: a quadratic scan took 31 s for 100K). */
static teeny_status index_names(const char *path, teeny_st_file *f)
{
    teeny_status st = TEENY_OK;
    f->by_name = teeny__malloc(sizeof *f->by_name * ((size_t)f->n + 1));
    if (!f->by_name)
        return teeny__error(NULL, TEENY_ERR_NOMEM, "safetensors %s: out of host memory", path);
    for (int i = 0; i < f->n; i++)
        f->by_name[i] = &f->t[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name);
    for (int i = 1; i < f->n && st == TEENY_OK; i++)
        if (!strcmp(f->by_name[i - 1]->name, f->by_name[i]->name))
            BAD("safetensors %s: tensor %s appears twice", path, f->by_name[i]->name);
    return st;
}

static teeny_status parse_metadata(const char *path, const cJSON *meta, teeny_st_file *f)
{
    teeny_status st = TEENY_OK;
    const cJSON *it;
    int n;
    if (!cJSON_IsObject(meta))
        return BAD("safetensors %s: __metadata__ is not an object", path);
    n = cJSON_GetArraySize(meta);
    f->meta_keys = teeny__calloc((size_t)n + 1, sizeof(char *));
    f->meta_values = teeny__calloc((size_t)n + 1, sizeof(char *));
    if (!f->meta_keys || !f->meta_values)
        return teeny__error(NULL, TEENY_ERR_NOMEM, "safetensors %s: out of host memory", path);
    cJSON_ArrayForEach(it, meta)
    {
        if (!cJSON_IsString(it) || !it->string)
            return BAD("safetensors %s: metadata %s is not a string", path, it->string ? it->string : "?");
        f->meta_keys[f->n_meta] = teeny__strdup(it->string);
        f->meta_values[f->n_meta] = teeny__strdup(it->valuestring);
        if (!f->meta_keys[f->n_meta] || !f->meta_values[f->n_meta]) {
            teeny__free(f->meta_keys[f->n_meta]);
            teeny__free(f->meta_values[f->n_meta]);
            f->meta_keys[f->n_meta] = f->meta_values[f->n_meta] = NULL;
            return teeny__error(NULL, TEENY_ERR_NOMEM, "safetensors %s: out of host memory", path);
        }
        f->n_meta++;
    }
    /* duplicates by sorting a copy of the keys: linear-log in the count */
    {
        char **keys = teeny__malloc(sizeof *keys * ((size_t)f->n_meta + 1));
        if (!keys)
            return teeny__error(NULL, TEENY_ERR_NOMEM, "safetensors %s: out of host memory", path);
        memcpy(keys, f->meta_keys, sizeof *keys * (size_t)f->n_meta);
        qsort(keys, (size_t)f->n_meta, sizeof *keys, cmp_str);
        for (int i = 1; i < f->n_meta && st == TEENY_OK; i++)
            if (!strcmp(keys[i - 1], keys[i]))
                BAD("safetensors %s: metadata key %s appears twice", path, keys[i]);
        teeny__free(keys);
    }
    return st;
}

static teeny_status parse_tensor(const char *path, const cJSON *obj, st_tensor *t)
{
    teeny_status st = TEENY_OK;
    const char *name = obj->string;
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(obj, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(obj, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(obj, "data_offsets"), *x;
    uint64_t bytes, esize;
    if (!cJSON_IsObject(obj))
        return BAD("safetensors %s: tensor %s: entry is not an object", path, name);
    if (!cJSON_IsString(dtype))
        return BAD("safetensors %s: tensor %s: dtype is missing", path, name);
    if (!strcmp(dtype->valuestring, "F32"))
        t->is_i64 = 0;
    else if (!strcmp(dtype->valuestring, "I64"))
        t->is_i64 = 1;
    else
        return BAD("safetensors %s: tensor %s: dtype %s is not supported (F32, I64)", path, name, dtype->valuestring);
    esize = t->is_i64 ? 8 : 4;
    if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > TEENY_ST_MAX_DIMS)
        return BAD("safetensors %s: tensor %s: shape is missing or has more than %d dimensions", path, name,
                   TEENY_ST_MAX_DIMS);
    t->ndim = 0;
    t->numel = 1;
    cJSON_ArrayForEach(x, shape)
    {
        uint64_t d;
        if (!json_uint(x, &d))
            return BAD("safetensors %s: tensor %s: shape entry %d is not a non-negative integer", path, name, t->ndim);
        if (d && t->numel > ST_MAX_OFFSET / d)
            return BAD("safetensors %s: tensor %s: shape too large", path, name);
        t->numel *= d;
        t->shape[t->ndim++] = (int64_t)d;
    }
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(cJSON_GetArrayItem(offs, 0), &t->begin) ||
        !json_uint(cJSON_GetArrayItem(offs, 1), &t->end) || t->end < t->begin)
        return BAD("safetensors %s: tensor %s: data_offsets must be [begin, end] with 0 <= begin <= end", path, name);
    bytes = t->end - t->begin;
    if (t->numel > ST_MAX_OFFSET / esize || bytes != t->numel * esize)
        return BAD("safetensors %s: tensor %s: data_offsets [%llu, %llu] hold %llu bytes; %s with %llu elements needs "
                   "%llu",
                   path, name, (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)bytes,
                   dtype->valuestring, (unsigned long long)t->numel, (unsigned long long)(t->numel * esize));
    return st;
}

static int cmp_begin(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Offsets inside the data section, contiguous from 0 and non-overlapping,
 * the last ending at the end of the file. */
static teeny_status check_layout(const char *path, teeny_st_file *f)
{
    teeny_status st = TEENY_OK;
    const st_tensor **order = teeny__malloc(sizeof *order * ((size_t)f->n + 1));
    uint64_t at = 0;
    if (!order)
        return teeny__error(NULL, TEENY_ERR_NOMEM, "safetensors %s: out of host memory", path);
    for (int i = 0; i < f->n; i++)
        order[i] = &f->t[i];
    qsort(order, (size_t)f->n, sizeof *order, cmp_begin);
    for (int i = 0; i < f->n && st == TEENY_OK; i++) {
        const st_tensor *t = order[i];
        if (t->end > f->data_len)
            BAD("safetensors %s: tensor %s: data_offsets [%llu, %llu] pass the end of the data section (%llu bytes; "
                "truncated file?)",
                path, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                (unsigned long long)f->data_len);
        else if (t->begin < at)
            BAD("safetensors %s: tensors %s and %s overlap", path, order[i - 1]->name, t->name);
        else if (t->begin > at)
            BAD("safetensors %s: %llu unused bytes before tensor %s", path, (unsigned long long)(t->begin - at),
                t->name);
        at = t->end;
    }
    if (st == TEENY_OK && at != f->data_len)
        BAD("safetensors %s: %llu bytes after the last tensor", path, (unsigned long long)(f->data_len - at));
    teeny__free(order);
    return st;
}

/* The offset of the first NUL inside a JSON string of the header, escaped
 * (\u0000) or raw, or -1: a name, dtype or metadata string that every C
 * string would cut short ("F32\u0000xx" would read as F32). */
static long nul_escape(const char *header, size_t len)
{
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        if (!in_string) {
            in_string = header[i] == '"';
        } else if (header[i] == '"') {
            in_string = 0;
        } else if (header[i] == '\0') {
            return (long)i;
        } else if (header[i] == '\\' && i + 1 < len) {
            if (header[i + 1] == 'u' && i + 6 <= len && !memcmp(header + i + 2, "0000", 4))
                return (long)i;
            i++; /* the escaped character */
        }
    }
    return -1;
}

static teeny_status parse_file(const char *path, teeny_st_file *f)
{
    teeny_status st = TEENY_OK;
    uint64_t hlen;
    const char *header, *end = NULL;
    cJSON *root = NULL;
    const cJSON *it, *meta;
    int n_items;
    if (f->size < 8)
        return BAD("safetensors %s: %zu bytes; too short for the 8-byte header length (truncated?)", path, f->size);
    hlen = get_le64(f->buf);
    if (hlen < 2 || hlen > ST_HEADER_MAX || hlen > f->size - 8)
        return BAD("safetensors %s: header length %llu is %s (file has %zu bytes)", path, (unsigned long long)hlen,
                   hlen < 2 || hlen > ST_HEADER_MAX ? "invalid" : "beyond the file (truncated?)", f->size);
    header = (const char *)f->buf + 8;
    f->data = f->buf + 8 + hlen;
    f->data_len = f->size - 8 - hlen;
    if (header[0] != '{')
        return BAD("safetensors %s: the header does not start with '{'", path);
    {
        size_t bad = 0;
        if (!teeny__utf8_valid(header, (size_t)hlen, &bad))
            return BAD("safetensors %s: the header is not valid UTF-8 (byte %zu of the header)", path, bad);
    }
    root = cJSON_ParseWithLengthOpts(header, (size_t)hlen, &end, 0);
    if (!root || !cJSON_IsObject(root)) {
        BAD("safetensors %s: the header is not a JSON object (error near byte %ld)", path,
            end ? (long)(end - header) : 0L);
        goto done;
    }
    for (; end < header + hlen; end++)
        if (*end != ' ' && *end != '\t' && *end != '\n' && *end != '\r') {
            BAD("safetensors %s: unexpected bytes after the header JSON (at byte %ld)", path, (long)(end - header));
            goto done;
        }
    if (nul_escape(header, (size_t)hlen) >= 0) {
        BAD("safetensors %s: a string in the header holds a NUL character (at byte %ld); names, dtypes and "
            "metadata may not",
            path, nul_escape(header, (size_t)hlen));
        goto done;
    }
    meta = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    if (meta && (st = parse_metadata(path, meta, f)) != TEENY_OK)
        goto done;
    {
        const char *hsum = teeny_st_metadata(f, HEADER_CHECKSUM_KEY);
        if (hsum && (st = check_header_sum(path, (const unsigned char *)header, (size_t)hlen, hsum)) != TEENY_OK)
            goto done;
    }
    n_items = cJSON_GetArraySize(root);
    f->t = teeny__calloc((size_t)n_items + 1, sizeof *f->t);
    f->names = teeny__calloc((size_t)n_items + 1, sizeof *f->names);
    if (!f->t || !f->names) {
        st = teeny__error(NULL, TEENY_ERR_NOMEM, "safetensors %s: out of host memory", path);
        goto done;
    }
    cJSON_ArrayForEach(it, root)
    {
        if (!strcmp(it->string, "__metadata__")) {
            if (it != meta) {
                BAD("safetensors %s: __metadata__ appears twice", path);
                goto done;
            }
            continue;
        }
        if (!*it->string) {
            BAD("safetensors %s: a tensor has an empty name", path);
            goto done;
        }
        if (!(f->names[f->n] = teeny__strdup(it->string))) {
            st = teeny__error(NULL, TEENY_ERR_NOMEM, "safetensors %s: out of host memory", path);
            goto done;
        }
        f->t[f->n].name = f->names[f->n];
        f->n++;
        if ((st = parse_tensor(path, it, &f->t[f->n - 1])) != TEENY_OK)
            goto done;
    }
    if ((st = index_names(path, f)) != TEENY_OK || (st = check_layout(path, f)) != TEENY_OK)
        goto done;
    {
        const char *dsum = teeny_st_metadata(f, CHECKSUM_KEY);
        if (dsum) {
            char hex[17];
            snprintf(hex, sizeof hex, "%016" PRIx64, teeny__fnv1a64(TEENY__FNV_BASIS, f->data, (size_t)f->data_len));
            if (strcmp(hex, dsum))
                BAD("safetensors %s: data checksum mismatch (stored %s, computed %s): the data is corrupt", path,
                    dsum, hex);
        }
    }
done:
    cJSON_Delete(root);
    return st;
}

teeny_status teeny_st_open(const char *path, teeny_st_file **out)
{
    teeny_st_file *f;
    teeny_status st;
    teeny__clear_error(NULL);
    if (out)
        *out = NULL;
    if (!path || !out)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_st_open: %s is NULL", !path ? "path" : "out");
    f = teeny__calloc(1, sizeof *f);
    if (!f || !(f->path = teeny__strdup(path))) {
        teeny__free(f);
        return teeny__error(NULL, TEENY_ERR_NOMEM, "teeny_st_open %s: out of host memory", path);
    }
    if ((st = read_whole(path, f)) != TEENY_OK || (st = parse_file(path, f)) != TEENY_OK) {
        teeny_st_close(f);
        return st;
    }
    *out = f;
    return TEENY_OK;
}

int teeny_st_count(const teeny_st_file *f)
{
    return f ? f->n : 0;
}

const char *teeny_st_name(const teeny_st_file *f, int i)
{
    return f && i >= 0 && i < f->n ? f->t[i].name : NULL;
}

static const st_tensor *find(const teeny_st_file *f, const char *name)
{
    st_tensor key = {.name = name};
    const st_tensor *kp = &key, *const *hit;
    if (!f->by_name)
        return NULL;
    hit = bsearch(&kp, f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name);
    return hit ? *hit : NULL;
}

const char *teeny_st_metadata(const teeny_st_file *f, const char *key)
{
    if (!f || !key)
        return NULL;
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_keys[i], key))
            return f->meta_values[i];
    return NULL;
}

teeny_status teeny_st_info(const teeny_st_file *f, const char *name, int *dtype_is_i64, int *ndim, int64_t *shape)
{
    const st_tensor *t;
    teeny__clear_error(NULL);
    if (!f || !name)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_st_info: %s is NULL", !f ? "file" : "name");
    if (!(t = find(f, name)))
        return teeny__error(NULL, TEENY_ERR_FORMAT, "safetensors %s: no tensor %s", f->path, name);
    if (dtype_is_i64)
        *dtype_is_i64 = t->is_i64;
    if (ndim)
        *ndim = t->ndim;
    if (shape)
        memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    return TEENY_OK;
}

teeny_status teeny_st_read_f32(const teeny_st_file *f, const char *name, teeny_tensor *dst)
{
    const st_tensor *t;
    teeny_ctx *ctx;
    int same;
    float *tmp = NULL;
    const float *src;
    teeny_status st;
    if (!dst || !dst->handle_alive)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_st_read_f32: dst is NULL or destroyed");
    ctx = dst->ctx;
    teeny__clear_error(ctx);
    if (!f || !name)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_st_read_f32: %s is NULL", !f ? "file" : "name");
    if (dst->dtype != TEENY__F32)
        return teeny__error(ctx, TEENY_ERR_ARG, "teeny_st_read_f32: dst for %s is int32", name);
    if (!(t = find(f, name)))
        return teeny__error(ctx, TEENY_ERR_FORMAT, "safetensors %s: no tensor %s", f->path, name);
    if (t->is_i64)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "safetensors %s: tensor %s is I64, expected F32", f->path, name);
    same = t->ndim == dst->ndim || (t->ndim == 0 && dst->numel == 1);
    for (int i = 0; same && t->ndim && i < t->ndim; i++)
        same = t->shape[i] == dst->shape[i];
    if (!same) {
        char fs[160], ds[96];
        teeny__dims_str(t->shape, t->ndim, fs, sizeof fs);
        return teeny__error(ctx, TEENY_ERR_SHAPE, "safetensors %s: tensor %s has shape %s; destination is %s",
                            f->path, name, fs, teeny__shape_str(dst, ds, sizeof ds));
    }
    src = (const float *)(const void *)(f->data + t->begin);
    if (!host_is_little_endian() || ((uintptr_t)src & 3u)) {
        const unsigned char *p = f->data + t->begin;
        tmp = teeny__malloc((size_t)t->numel * 4);
        if (!tmp)
            return teeny__error(ctx, TEENY_ERR_NOMEM, "teeny_st_read_f32: out of host memory");
        for (size_t i = 0; i < (size_t)t->numel; i++) {
            uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                         (uint32_t)p[4 * i + 3] << 24;
            memcpy(&tmp[i], &u, 4);
        }
        src = tmp;
    }
    st = teeny_tensor_write(dst, src, (size_t)t->numel);
    teeny__free(tmp);
    return st;
}

teeny_status teeny_st_read_i64(const teeny_st_file *f, const char *name, int64_t *dst, size_t count)
{
    const st_tensor *t;
    teeny__clear_error(NULL);
    if (!f || !name || !dst)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_st_read_i64: %s is NULL", !f ? "file" : !name ? "name" : "dst");
    if (!(t = find(f, name)))
        return teeny__error(NULL, TEENY_ERR_FORMAT, "safetensors %s: no tensor %s", f->path, name);
    if (!t->is_i64)
        return teeny__error(NULL, TEENY_ERR_FORMAT, "safetensors %s: tensor %s is F32, expected I64", f->path, name);
    if (count != t->numel)
        return teeny__error(NULL, TEENY_ERR_SHAPE, "safetensors %s: tensor %s has %llu elements, caller expects %zu",
                            f->path, name, (unsigned long long)t->numel, count);
    for (size_t i = 0; i < count; i++)
        dst[i] = (int64_t)get_le64(f->data + t->begin + 8 * i);
    return TEENY_OK;
}
