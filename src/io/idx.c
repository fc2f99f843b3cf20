/*
 * idx.c -- IDX files (MNIST, Fashion-MNIST): magic 0x00 0x00 <type> <ndim>,
 * ndim big-endian u32 sizes, then the values row-major. Only unsigned
 * bytes (type 0x08) are supported, which is what the image and label files
 * hold. Read through zlib's gz* functions, so plain and gzip-compressed
 * files both work. The file must hold exactly the values its sizes promise.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "../internal.h"

#define IDX_MAX_DIMS 4
#define IDX_MAX_VALUES ((uint64_t)INT32_MAX)

struct teeny_idx {
    int ndim;
    int64_t dims[IDX_MAX_DIMS];
    uint8_t *data;
};

/* Read up to n bytes; the count read, or -1 on a stream error. */
static int64_t gz_read_all(gzFile gz, void *buf, uint64_t n)
{
    unsigned char *p = buf;
    uint64_t done = 0;
    while (done < n) {
        unsigned chunk = n - done > (1u << 30) ? (1u << 30) : (unsigned)(n - done);
        int r = gzread(gz, p + done, chunk);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        done += (uint64_t)r;
    }
    return (int64_t)done;
}

static const char *gz_message(gzFile gz)
{
    int code;
    const char *m = gzerror(gz, &code);
    return code == Z_ERRNO ? strerror(errno) : m;
}

teeny_status teeny_idx_load(const char *path, teeny_idx **out)
{
    teeny_status st = TEENY_OK;
    gzFile gz;
    unsigned char head[4], dim_bytes[4 * IDX_MAX_DIMS], extra;
    uint64_t count = 1;
    int64_t got;
    teeny_idx *idx = NULL;
    teeny__clear_error(NULL);
    if (out)
        *out = NULL;
    if (!path || !out)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_idx_load: %s is NULL", !path ? "path" : "out");
    {
        const char *why;
        int fd = teeny__open_regular(path, &why);
        if (fd < 0)
            return teeny__error(NULL, TEENY_ERR_IO, "idx %s: cannot open: %s", path, why);
        if (!(gz = gzdopen(fd, "rb"))) {
            close(fd);
            return teeny__error(NULL, TEENY_ERR_NOMEM, "idx %s: out of host memory", path);
        }
    }
    got = gz_read_all(gz, head, 4);
    if (got < 0) {
        st = teeny__error(NULL, TEENY_ERR_FORMAT, "idx %s: %s", path, gz_message(gz));
        goto done;
    }
    if (got < 4 || head[0] != 0 || head[1] != 0) {
        st = teeny__error(NULL, TEENY_ERR_FORMAT, "idx %s: bad magic (not an IDX file)", path);
        goto done;
    }
    if (head[2] != 0x08) {
        st = teeny__error(NULL, TEENY_ERR_FORMAT, "idx %s: value type 0x%02x is not supported (only 0x08, u8)", path,
                          head[2]);
        goto done;
    }
    if (head[3] < 1 || head[3] > IDX_MAX_DIMS) {
        st = teeny__error(NULL, TEENY_ERR_FORMAT, "idx %s: %d dimensions; 1 to %d are supported", path, head[3],
                          IDX_MAX_DIMS);
        goto done;
    }
    idx = teeny__calloc(1, sizeof *idx);
    if (!idx) {
        st = teeny__error(NULL, TEENY_ERR_NOMEM, "idx %s: out of host memory", path);
        goto done;
    }
    idx->ndim = head[3];
    got = gz_read_all(gz, dim_bytes, 4 * (uint64_t)idx->ndim);
    if (got != 4 * idx->ndim) {
        st = teeny__error(NULL, TEENY_ERR_FORMAT, "idx %s: truncated header (%s)", path,
                          got < 0 ? gz_message(gz) : "end of file");
        goto done;
    }
    for (int i = 0; i < idx->ndim; i++) {
        const unsigned char *b = dim_bytes + 4 * i;
        uint32_t d = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        if (d == 0) {
            st = teeny__error(NULL, TEENY_ERR_FORMAT, "idx %s: size of dimension %d is 0", path, i);
            goto done;
        }
        if (count > IDX_MAX_VALUES / d) {
            st = teeny__error(NULL, TEENY_ERR_FORMAT, "idx %s: more than 2^31 - 1 values", path);
            goto done;
        }
        count *= d;
        idx->dims[i] = d;
    }
    idx->data = teeny__malloc((size_t)count);
    if (!idx->data) {
        st = teeny__error(NULL, TEENY_ERR_NOMEM, "idx %s: out of host memory for %llu bytes", path,
                          (unsigned long long)count);
        goto done;
    }
    got = gz_read_all(gz, idx->data, count);
    if (got < 0 || (uint64_t)got != count) {
        st = teeny__error(NULL, TEENY_ERR_FORMAT, "idx %s: truncated: %lld of %llu values (%s)", path,
                          (long long)(got < 0 ? 0 : got), (unsigned long long)count,
                          got < 0 ? gz_message(gz) : "end of file");
        goto done;
    }
    got = gz_read_all(gz, &extra, 1);
    if (got != 0) {
        st = teeny__error(NULL, TEENY_ERR_FORMAT, "idx %s: %s after the %llu values", path,
                          got < 0 ? gz_message(gz) : "trailing bytes", (unsigned long long)count);
        goto done;
    }
    { /* gzread returns what it has when a gzip stream ends early */
        int code;
        const char *m = gzerror(gz, &code);
        if (code != Z_OK && code != Z_STREAM_END)
            st = teeny__error(NULL, TEENY_ERR_FORMAT, "idx %s: corrupt or truncated gzip stream: %s", path, m);
    }
done:
    gzclose(gz);
    if (st != TEENY_OK) {
        teeny_idx_free(idx);
        return st;
    }
    *out = idx;
    return TEENY_OK;
}

void teeny_idx_free(teeny_idx *idx)
{
    if (!idx)
        return;
    teeny__free(idx->data);
    teeny__free(idx);
}

int teeny_idx_ndim(const teeny_idx *idx)
{
    return idx ? idx->ndim : 0;
}

int64_t teeny_idx_dim(const teeny_idx *idx, int axis)
{
    if (!idx || axis < 0 || axis >= idx->ndim)
        return -1;
    return idx->dims[axis];
}

const uint8_t *teeny_idx_data(const teeny_idx *idx)
{
    return idx ? idx->data : NULL;
}

teeny_status teeny_idx_check_labels(const teeny_idx *labels, int n_classes)
{
    teeny__clear_error(NULL);
    if (!labels)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_idx_check_labels: labels is NULL");
    if (n_classes < 1 || n_classes > 256)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_idx_check_labels: n_classes %d outside 1..256", n_classes);
    if (labels->ndim != 1)
        return teeny__error(NULL, TEENY_ERR_SHAPE, "teeny_idx_check_labels: labels have %d dimensions; expected 1",
                            labels->ndim);
    for (int64_t i = 0; i < labels->dims[0]; i++)
        if (labels->data[i] >= n_classes)
            return teeny__error(NULL, TEENY_ERR_FORMAT, "idx labels: label %lld is %d, outside 0..%d", (long long)i,
                                labels->data[i], n_classes - 1);
    return TEENY_OK;
}
