/*
 * safetensors_write.c -- the safetensors writer: teeny_st_writer collects
 * named F32 device tensors (held by reference until the writer is
 * destroyed, read back when the file is written, so a tensor destroyed in
 * between is reported, not read after free), I64 host values and string
 * metadata; teeny_st_write lays them
 * out in the order added, adds the data and header checksums
 * (teenycl_checksum, teenycl_header_checksum) and writes the file
 * crash-safely through io/file.c. The format and the checksums are
 * described in safetensors.c, the shared keys and helpers are in
 * safetensors_internal.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "safetensors_internal.h"

/* ---- writer ---- */

typedef struct {
    char *name;
    teeny_tensor *t; /* F32 (held: teeny__tensor_hold), or NULL for I64 */
    int64_t *i64;
    int ndim;
    int64_t shape[TEENY_ST_MAX_DIMS];
    uint64_t numel;
} st_entry;

typedef struct {
    char *key, *value;
} st_meta;

struct teeny_st_writer {
    st_entry *e;
    int n, cap;
    st_meta *meta;
    int n_meta, cap_meta;
};

teeny_status teeny_st_writer_create(teeny_st_writer **out)
{
    teeny__clear_error(NULL);
    if (!out)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_st_writer_create: out is NULL");
    *out = teeny__calloc(1, sizeof **out);
    if (!*out)
        return teeny__error(NULL, TEENY_ERR_NOMEM, "teeny_st_writer_create: out of host memory");
    return TEENY_OK;
}

void teeny_st_writer_destroy(teeny_st_writer *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->n; i++) {
        teeny__free(w->e[i].name);
        teeny__free(w->e[i].i64);
        if (w->e[i].t)
            teeny__tensor_drop(w->e[i].t);
    }
    for (int i = 0; i < w->n_meta; i++) {
        teeny__free(w->meta[i].key);
        teeny__free(w->meta[i].value);
    }
    teeny__free(w->e);
    teeny__free(w->meta);
    teeny__free(w);
}

/* The start of an add: the last error cleared, then w and name checked
 * (not NULL, a name allowed and not added before). */
static teeny_status check_name(const teeny_st_writer *w, const char *fn, const char *name)
{
    teeny__clear_error(NULL);
    if (!w || !name)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: %s is NULL", fn, !w ? "writer" : "name");
    if (!*name || !strcmp(name, "__metadata__"))
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: tensor name \"%s\" is not allowed", fn, name);
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->e[i].name, name))
            return teeny__error(NULL, TEENY_ERR_ARG, "%s: tensor %s was already added", fn, name);
    return TEENY_OK;
}

static teeny_status add_entry(teeny_st_writer *w, const char *fn, const st_entry *e)
{
    st_entry copy = *e;
    if (!teeny__grow((void **)&w->e, &w->cap, w->n, sizeof *w->e) || !(copy.name = teeny__strdup(e->name)))
        return teeny__error(NULL, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    w->e[w->n++] = copy;
    return TEENY_OK;
}

teeny_status teeny_st_add_tensor(teeny_st_writer *w, const char *name, const teeny_tensor *t)
{
    const char *fn = "teeny_st_add_tensor";
    st_entry e = {0};
    teeny_status st = check_name(w, fn, name);
    if (st != TEENY_OK)
        return st;
    if (!t || !t->handle_alive)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: tensor %s is NULL or destroyed", fn, name);
    if (t->dtype != TEENY__F32)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: tensor %s is int32; only fp32 tensors are stored", fn, name);
    e.name = (char *)name;
    e.t = (teeny_tensor *)t; /* the writer's reference: bookkeeping, t's data is only read */
    e.ndim = t->ndim;
    memcpy(e.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    e.numel = (uint64_t)t->numel;
    if ((st = add_entry(w, fn, &e)) == TEENY_OK)
        teeny__tensor_hold(e.t);
    return st;
}

teeny_status teeny_st_add_i64(teeny_st_writer *w, const char *name, int ndim, const int64_t *shape,
                              const int64_t *values)
{
    const char *fn = "teeny_st_add_i64";
    st_entry e = {0};
    teeny_status st = check_name(w, fn, name);
    if (st != TEENY_OK)
        return st;
    if (ndim < 0 || ndim > TEENY_ST_MAX_DIMS || (ndim > 0 && !shape))
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: tensor %s: ndim %d outside 0..%d or shape NULL", fn, name, ndim,
                            TEENY_ST_MAX_DIMS);
    e.numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && e.numel > (ST_MAX_OFFSET / 8) / (uint64_t)shape[i]))
            return teeny__error(NULL, TEENY_ERR_ARG, "%s: tensor %s: size %lld of axis %d is negative or too large",
                                fn, name, (long long)shape[i], i);
        e.numel *= (uint64_t)shape[i];
        e.shape[i] = shape[i];
    }
    if (e.numel > 0 && !values)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: tensor %s: values is NULL", fn, name);
    e.name = (char *)name;
    e.ndim = ndim;
    if (e.numel > SIZE_MAX / 8 || !(e.i64 = teeny__malloc(e.numel ? (size_t)e.numel * 8 : 1)))
        return teeny__error(NULL, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    if (e.numel)
        memcpy(e.i64, values, (size_t)e.numel * 8);
    if ((st = add_entry(w, fn, &e)) != TEENY_OK)
        teeny__free(e.i64);
    return st;
}

teeny_status teeny_st_add_metadata(teeny_st_writer *w, const char *key, const char *value)
{
    const char *fn = "teeny_st_add_metadata";
    char *k, *v;
    teeny__clear_error(NULL);
    if (!w || !key || !value)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: %s is NULL", fn, !w ? "writer" : !key ? "key" : "value");
    if (!*key || !strncmp(key, "teenycl_", 8))
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: key \"%s\" is empty or reserved (teenycl_*)", fn, key);
    for (int i = 0; i < w->n_meta; i++)
        if (!strcmp(w->meta[i].key, key))
            return teeny__error(NULL, TEENY_ERR_ARG, "%s: key %s was already added", fn, key);
    k = teeny__strdup(key);
    v = teeny__strdup(value);
    if (!k || !v || !teeny__grow((void **)&w->meta, &w->cap_meta, w->n_meta, sizeof *w->meta)) {
        teeny__free(k);
        teeny__free(v);
        return teeny__error(NULL, TEENY_ERR_NOMEM, "%s: out of host memory", fn);
    }
    w->meta[w->n_meta].key = k;
    w->meta[w->n_meta++].value = v;
    return TEENY_OK;
}

/* cJSON array of non-negative integers (exact below 2^53). */
static cJSON *json_uints(const uint64_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *x = cJSON_CreateNumber((double)v[i]);
        if (!x || !cJSON_AddItemToArray(a, x)) {
            cJSON_Delete(x);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* The header JSON for data of the given checksum, with the header
 * checksum's digits zeroed; caller frees with cJSON_free. */
static char *header_json(const teeny_st_writer *w, const uint64_t *offsets, uint64_t data_sum)
{
    char hex[17];
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    char *s = NULL;
    int ok = root && meta && cJSON_AddItemToObject(root, "__metadata__", meta);
    if (!ok)
        cJSON_Delete(meta);
    for (int i = 0; ok && i < w->n_meta; i++)
        ok = cJSON_AddStringToObject(meta, w->meta[i].key, w->meta[i].value) != NULL;
    snprintf(hex, sizeof hex, "%016" PRIx64, data_sum);
    ok = ok && cJSON_AddStringToObject(meta, CHECKSUM_KEY, hex) != NULL &&
         cJSON_AddStringToObject(meta, HEADER_CHECKSUM_KEY, "0000000000000000") != NULL;
    for (int i = 0; ok && i < w->n; i++) {
        const st_entry *e = &w->e[i];
        uint64_t shape[TEENY_ST_MAX_DIMS];
        cJSON *t = cJSON_CreateObject(), *sh, *off;
        for (int d = 0; d < e->ndim; d++)
            shape[d] = (uint64_t)e->shape[d];
        sh = json_uints(shape, e->ndim);
        off = json_uints(&offsets[2 * i], 2);
        ok = t && sh && off && cJSON_AddStringToObject(t, "dtype", e->t ? "F32" : "I64") &&
             cJSON_AddItemToObject(t, "shape", sh) && cJSON_AddItemToObject(t, "data_offsets", off);
        if (!ok) {
            if (!t || !cJSON_GetObjectItemCaseSensitive(t, "shape"))
                cJSON_Delete(sh);
            if (!t || !cJSON_GetObjectItemCaseSensitive(t, "data_offsets"))
                cJSON_Delete(off);
            cJSON_Delete(t);
        } else if (!cJSON_AddItemToObject(root, e->name, t)) {
            cJSON_Delete(t);
            ok = 0;
        }
    }
    if (ok)
        s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* Host little-endian bytes of entry e into dst. */
static teeny_status entry_bytes(const st_entry *e, const char *path, unsigned char *dst)
{
    size_t n = (size_t)e->numel;
    if (e->t) {
        teeny_status st = teeny_tensor_read(e->t, (float *)(void *)dst, n);
        if (st != TEENY_OK)
            return teeny__error(NULL, st, "teeny_st_write %s: reading tensor %s failed: %s", path, e->name,
                                teeny_last_error(e->t->ctx));
        if (!host_is_little_endian())
            for (size_t i = 0; i < n; i++) {
                unsigned char *p = dst + 4 * i, a = p[0], b = p[1];
                p[0] = p[3];
                p[1] = p[2];
                p[2] = b;
                p[3] = a;
            }
        return TEENY_OK;
    }
    for (size_t i = 0; i < n; i++)
        put_le64(dst + 8 * i, (uint64_t)e->i64[i]);
    return TEENY_OK;
}

teeny_status teeny_st_write(teeny_st_writer *w, const char *path)
{
    const char *fn = "teeny_st_write";
    uint64_t total = 0, *offsets = NULL, hsum;
    unsigned char *data = NULL, *header = NULL, lenbuf[8];
    char *json = NULL, *at;
    size_t jlen, hlen;
    teeny_status st = TEENY_OK;
    teeny__clear_error(NULL);
    if (!w || !path)
        return teeny__error(NULL, TEENY_ERR_ARG, "%s: %s is NULL", fn, !w ? "writer" : "path");
    for (int i = 0; i < w->n; i++) {
        const st_entry *e = &w->e[i];
        if (e->t && !e->t->handle_alive) /* held, so still readable */
            return teeny__error(NULL, TEENY_ERR_ARG, "%s %s: tensor %s was destroyed before the write", fn, path,
                                e->name);
        total += e->numel * (e->t ? 4 : 8);
        if (total >= ST_MAX_OFFSET || total > SIZE_MAX / 2)
            return teeny__error(NULL, TEENY_ERR_RANGE, "%s %s: data past 2^53 bytes", fn, path);
    }
    offsets = teeny__malloc(sizeof *offsets * 2 * (size_t)(w->n + 1));
    data = teeny__malloc(total ? (size_t)total : 1);
    if (!offsets || !data) {
        st = teeny__error(NULL, TEENY_ERR_NOMEM, "%s %s: out of host memory for %llu bytes", fn, path,
                          (unsigned long long)total);
        goto cleanup;
    }
    total = 0;
    for (int i = 0; i < w->n; i++) {
        const st_entry *e = &w->e[i];
        offsets[2 * i] = total;
        if ((st = entry_bytes(e, path, data + total)) != TEENY_OK)
            goto cleanup;
        total += e->numel * (e->t ? 4 : 8);
        offsets[2 * i + 1] = total;
    }
    /* offsets is [begin0, end0, begin1, end1, ...]: pairs per entry */
    json = header_json(w, offsets, teeny__fnv1a64(TEENY__FNV_BASIS, data, (size_t)total));
    if (!json) {
        st = teeny__error(NULL, TEENY_ERR_NOMEM, "%s %s: out of host memory building the header", fn, path);
        goto cleanup;
    }
    jlen = strlen(json);
    hlen = (jlen + 7) / 8 * 8;
    header = teeny__malloc(hlen);
    if (!header) {
        st = teeny__error(NULL, TEENY_ERR_NOMEM, "%s %s: out of host memory", fn, path);
        goto cleanup;
    }
    memcpy(header, json, jlen);
    memset(header + jlen, ' ', hlen - jlen);
    if (!(at = strstr(json, HEADER_CHECKSUM_PATTERN))) {
        st = teeny__error(NULL, TEENY_ERR_STATE, "%s %s: internal: header checksum entry not found", fn, path);
        goto cleanup;
    }
    hsum = teeny__fnv1a64(TEENY__FNV_BASIS, header, hlen);
    {
        char hex[17];
        snprintf(hex, sizeof hex, "%016" PRIx64, hsum);
        memcpy(header + (at - json) + strlen(HEADER_CHECKSUM_PATTERN), hex, 16);
    }
    put_le64(lenbuf, hlen);
    {
        const void *parts[3] = {lenbuf, header, data};
        size_t lens[3] = {8, hlen, (size_t)total};
        st = teeny__write_file_atomic(NULL, fn, path, parts, lens, 3);
    }
cleanup:
    if (json)
        cJSON_free(json);
    teeny__free(header);
    teeny__free(data);
    teeny__free(offsets);
    return st;
}
