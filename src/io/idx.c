/*
 * idx.c -- IDX files (MNIST, Fashion-MNIST): magic 0x00 0x00 <type> <ndim>,
 * ndim big-endian u32 sizes, then the values row-major. Only unsigned
 * bytes (type 0x08) are supported, which is what the image and label files
 * hold. Plain and gzip-compressed files both work: the whole file is read
 * (its real size bounds that), and a gzip file is inflated with zlib as a
 * stream (concatenated members allowed).
 *
 * Nothing is allocated from the header's word: a plain file must hold
 * exactly the values its sizes promise (checked against the file size
 * before allocating), and a gzip file's promise is first checked against
 * what its compressed size can possibly inflate to (deflate's ratio is at
 * most 1032:1), then the value buffer grows only as data arrives. Truncated
 * data, trailing bytes and anything after the last gzip member are
 * TEENY_ERR_FORMAT.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "../internal.h"

#define IDX_MAX_DIMS 4
#define IDX_MAX_VALUES ((uint64_t)INT32_MAX)
#define DEFLATE_MAX_RATIO 1032u /* zlib's technical note: the most deflate can compress */
#define FIRST_CHUNK (1u << 20)  /* gzip: the value buffer's first size */

struct teeny_idx {
    int ndim;
    int64_t dims[IDX_MAX_DIMS];
    uint8_t *data;
};

/* The file's bytes, plain or inflated on demand. */
typedef struct {
    const unsigned char *file;
    size_t size, at; /* plain: read position */
    int gzip;
    z_stream z;
    int z_live, ended; /* inflateInit2 done; the last member ended */
    const char *err;   /* why a read failed (corrupt gzip, trailing bytes) */
} idx_src;

/* Up to n bytes into dst; the count read (less only at the end or on an
 * error, then src->err is set). */
static size_t src_read(idx_src *s, unsigned char *dst, size_t n)
{
    size_t done = 0;
    if (!s->gzip) {
        done = n < s->size - s->at ? n : s->size - s->at;
        memcpy(dst, s->file + s->at, done);
        s->at += done;
        return done;
    }
    while (done < n && !s->ended && !s->err) {
        uInt want = n - done > (1u << 30) ? (1u << 30) : (uInt)(n - done);
        int r;
        s->z.next_out = dst + done;
        s->z.avail_out = want;
        r = inflate(&s->z, Z_NO_FLUSH);
        done += want - s->z.avail_out;
        if (r == Z_STREAM_END) {
            /* another gzip member may follow; anything else is trailing data */
            if (s->z.avail_in == 0)
                s->ended = 1;
            else if (s->z.avail_in >= 2 && s->z.next_in[0] == 0x1f && s->z.next_in[1] == 0x8b)
                inflateReset(&s->z);
            else
                s->err = "trailing bytes after the gzip stream";
        } else if (r == Z_BUF_ERROR) { /* no progress possible: room was left, so input ran out */
            s->err = s->z.avail_in == 0 ? "the gzip stream is truncated" : "corrupt gzip stream";
        } else if (r != Z_OK) {
            s->err = s->z.msg ? s->z.msg : "corrupt gzip stream";
        }
    }
    return done;
}

/* Read the whole file at path into *buf (caller frees). */
static teeny_status read_file(const char *path, unsigned char **buf, size_t *size)
{
    const char *why;
    struct stat sb;
    size_t done = 0;
    teeny_status st = TEENY_OK;
    int fd = teeny__open_regular(path, &why);
    *buf = NULL;
    if (fd < 0)
        return teeny__error(NULL, TEENY_ERR_IO, "idx %s: cannot open: %s", path, why);
    if (fstat(fd, &sb) != 0) {
        st = teeny__error(NULL, TEENY_ERR_IO, "idx %s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    if ((uint64_t)sb.st_size > SIZE_MAX / 2) {
        st = teeny__error(NULL, TEENY_ERR_RANGE, "idx %s: too large for this host", path);
        goto done;
    }
    *size = (size_t)sb.st_size;
    if (!(*buf = teeny__malloc(*size ? *size : 1))) {
        st = teeny__error(NULL, TEENY_ERR_NOMEM, "idx %s: out of host memory for %zu bytes", path, *size);
        goto done;
    }
    while (done < *size) {
        ssize_t r = read(fd, *buf + done, *size - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            st = teeny__error(NULL, TEENY_ERR_IO, "idx %s: reading failed: %s", path,
                              r < 0 ? strerror(errno) : "the file shrank while being read");
            goto done;
        }
        done += (size_t)r;
    }
done:
    close(fd);
    if (st != TEENY_OK) {
        teeny__free(*buf);
        *buf = NULL;
    }
    return st;
}

#define BAD(...) (st = teeny__error(NULL, TEENY_ERR_FORMAT, __VA_ARGS__))

/* The values after the header: exactly count bytes, then the end. */
static teeny_status read_values(const char *path, idx_src *s, uint64_t count, teeny_idx *idx)
{
    teeny_status st = TEENY_OK;
    size_t cap, got = 0;
    unsigned char extra;
    if (!s->gzip) {
        if (count != s->size - s->at)
            return BAD("idx %s: %s: the header promises %llu values, the file holds %zu", path,
                       count > s->size - s->at ? "truncated" : "trailing bytes", (unsigned long long)count,
                       s->size - s->at);
        cap = (size_t)count;
    } else {
        /* the most the compressed bytes left can inflate to, with slack for headers */
        uint64_t most = (uint64_t)(s->size - (s->file ? (size_t)(s->z.next_in - s->file) : 0)) * DEFLATE_MAX_RATIO + 4096;
        if (count > most)
            return BAD("idx %s: truncated: the header promises %llu values; %zu compressed bytes cannot hold that many",
                       path, (unsigned long long)count, s->size);
        cap = count < FIRST_CHUNK ? (size_t)count : FIRST_CHUNK;
    }
    if (!(idx->data = teeny__malloc(cap)))
        return teeny__error(NULL, TEENY_ERR_NOMEM, "idx %s: out of host memory for %zu bytes", path, cap);
    for (;;) {
        size_t r = src_read(s, idx->data + got, cap - got);
        got += r;
        if (got < cap || cap == count)
            break;
        { /* grow by doubling, only as far as data actually arrived */
            size_t ncap = (uint64_t)cap * 2 < count ? cap * 2 : (size_t)count;
            unsigned char *p = teeny__malloc(ncap);
            if (!p)
                return teeny__error(NULL, TEENY_ERR_NOMEM, "idx %s: out of host memory for %zu bytes", path, ncap);
            memcpy(p, idx->data, got);
            teeny__free(idx->data);
            idx->data = p;
            cap = ncap;
        }
    }
    if (got < count)
        return BAD("idx %s: truncated: %zu of %llu values (%s)", path, got, (unsigned long long)count,
                   s->err ? s->err : "end of file");
    if (src_read(s, &extra, 1) != 0 || s->err)
        return BAD("idx %s: %s after the %llu values", path, s->err ? s->err : "trailing bytes",
                   (unsigned long long)count);
    return st;
}

teeny_status teeny_idx_load(const char *path, teeny_idx **out)
{
    teeny_status st = TEENY_OK;
    unsigned char head[4], dim_bytes[4 * IDX_MAX_DIMS];
    uint64_t count = 1;
    idx_src s = {0};
    unsigned char *file = NULL;
    teeny_idx *idx = NULL;
    teeny__clear_error(NULL);
    if (out)
        *out = NULL;
    if (!path || !out)
        return teeny__error(NULL, TEENY_ERR_ARG, "teeny_idx_load: %s is NULL", !path ? "path" : "out");
    if ((st = read_file(path, &file, &s.size)) != TEENY_OK)
        return st;
    s.file = file;
    s.gzip = s.size >= 2 && file[0] == 0x1f && file[1] == 0x8b;
    if (s.gzip) {
        if (s.size > UINT_MAX) {
            st = teeny__error(NULL, TEENY_ERR_RANGE, "idx %s: gzip files past 4 GiB are not supported", path);
            goto done;
        }
        s.z.next_in = file;
        s.z.avail_in = (uInt)s.size;
        if (inflateInit2(&s.z, 16 + MAX_WBITS) != Z_OK) {
            st = teeny__error(NULL, TEENY_ERR_NOMEM, "idx %s: out of host memory for zlib", path);
            goto done;
        }
        s.z_live = 1;
    }
    if (src_read(&s, head, 4) < 4) {
        BAD("idx %s: %s", path, s.err ? s.err : "bad magic (not an IDX file)");
        goto done;
    }
    if (head[0] != 0 || head[1] != 0) {
        BAD("idx %s: bad magic (not an IDX file)", path);
        goto done;
    }
    if (head[2] != 0x08) {
        BAD("idx %s: value type 0x%02x is not supported (only 0x08, u8)", path, head[2]);
        goto done;
    }
    if (head[3] < 1 || head[3] > IDX_MAX_DIMS) {
        BAD("idx %s: %d dimensions; 1 to %d are supported", path, head[3], IDX_MAX_DIMS);
        goto done;
    }
    if (!(idx = teeny__calloc(1, sizeof *idx))) {
        st = teeny__error(NULL, TEENY_ERR_NOMEM, "idx %s: out of host memory", path);
        goto done;
    }
    idx->ndim = head[3];
    if (src_read(&s, dim_bytes, 4 * (size_t)idx->ndim) != 4 * (size_t)idx->ndim) {
        BAD("idx %s: truncated header (%s)", path, s.err ? s.err : "end of file");
        goto done;
    }
    for (int i = 0; i < idx->ndim; i++) {
        const unsigned char *b = dim_bytes + 4 * i;
        uint32_t d = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        if (d == 0) {
            BAD("idx %s: size of dimension %d is 0", path, i);
            goto done;
        }
        if (count > IDX_MAX_VALUES / d) {
            BAD("idx %s: more than 2^31 - 1 values", path);
            goto done;
        }
        count *= d;
        idx->dims[i] = d;
    }
    st = read_values(path, &s, count, idx);
done:
    if (s.z_live)
        inflateEnd(&s.z);
    teeny__free(file);
    if (st != TEENY_OK) {
        teeny_idx_free(idx);
        return st;
    }
    *out = idx;
    return TEENY_OK;
}
/* The uniform destructor name; teeny_idx_free is its deprecated alias. */
void teeny_idx_destroy(teeny_idx *idx)
{
    teeny_idx_free(idx);
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
