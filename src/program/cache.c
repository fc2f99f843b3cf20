/*
 * cache.c -- the on-disk kernel binary cache: where it lives, the entry
 * key, and the entry format, read and written as bytes (no OpenCL here:
 * build.c turns entries into programs and programs into entries).
 * Dependencies: status.c and the atomic writer (io/) only; nothing in the
 * build/launch layers is called from here.
 *
 * Disk cache: $TEENY_CACHE_DIR, else $XDG_CACHE_HOME/teenycl, else
 * ~/.cache/teenycl; TEENY_NO_CACHE=1 turns it off. An entry is named by a
 * 128-bit hash of its key and holds (little-endian):
 *   "TEENYKC2", u32 key length, u32 names length, u64 payload length,
 *   u32 crc32 of the payload, u32 crc32 of everything before the payload
 *   (this field zeroed), the key, the kernel names, the program binary.
 * The key is the text "library version, source hash, options, device,
 * platform, driver" in full, so an entry answers only the exact build it was
 * made for, whatever its file name; the kernel names are what the program
 * built from source holds, so a foreign binary under the right key is
 * caught after it builds, and each must be declared in the family's source
 * (teeny__cache_names_ok), so is one stored with its own family's names. Every length is checked against the file size
 * before anything is allocated. Entries are written with the library's
 * atomic writer (temp file, fsync, rename, fsync of the directory), so
 * concurrent processes never see half an entry. An entry that fails any
 * check, that is not a regular file, or that the driver rejects in any way
 * is a miss: the program is rebuilt from source and the entry overwritten.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <zlib.h>

#include "internal.h"

static const char CACHE_MAGIC[8] = {'T', 'E', 'E', 'N', 'Y', 'K', 'C', '2'};
#define CACHE_HEADER 32
#define CACHE_KEY_MAX 65536
#define CACHE_NAMES_MAX (1u << 20)

/* ---- hashing ---- */

static uint64_t hash_str(uint64_t h, const char *s)
{
    return teeny__fnv1a64(h, s, strlen(s) + 1); /* the NUL separates fields */
}

/* ---- disk cache ---- */

void teeny__cache_dir(char *out, size_t cap)
{
    const char *no = getenv("TEENY_NO_CACHE");
    const char *dir = getenv("TEENY_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int len = 0;
    out[0] = '\0';
    if (no && *no && strcmp(no, "0")) /* "1" (teeny__env_check refuses other values) */
        return;
    if (dir && *dir)
        len = snprintf(out, cap, "%s", dir);
    else if (xdg && *xdg)
        len = snprintf(out, cap, "%s/teenycl", xdg);
    else if (home && *home)
        len = snprintf(out, cap, "%s/.cache/teenycl", home);
    if (len < 0 || (size_t)len >= cap) { /* cut short, it would name another directory */
        teeny__log(TEENY_LOG_WARN, "kernel cache: the directory path is too long; the disk cache is off");
        out[0] = '\0';
    }
}

static int mkdir_p(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

static uint32_t get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t crc(uint32_t c, const unsigned char *p, size_t n)
{
    while (n > 0) { /* zlib's crc32 takes a uInt length */
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = (uint32_t)crc32(c, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return c;
}

/* The crc32 of an entry's header fields (its own slot zeroed), key and names. */
static uint32_t header_crc(const unsigned char *head, const char *key, size_t key_len, const char *names,
                           size_t names_len)
{
    unsigned char h[CACHE_HEADER];
    uint32_t c = (uint32_t)crc32(0, Z_NULL, 0);
    memcpy(h, head, CACHE_HEADER);
    put_le32(h + 28, 0);
    c = crc(c, h, CACHE_HEADER);
    c = crc(c, (const unsigned char *)key, key_len);
    return crc(c, (const unsigned char *)names, names_len);
}

/* A cached entry for key: its binary and kernel names (caller frees both),
 * or 0 when absent or unusable (then rebuilt and overwritten). */
int teeny__cache_load(const char *path, const char *key, unsigned char **bin, size_t *len, char **names)
{
    char msg[256];
    const char *why = msg;
    unsigned char *file = NULL;
    size_t size = 0, key_len = strlen(key), names_len;
    uint64_t payload_len;
    int ok = 0;
    *bin = NULL;
    *names = NULL;
    if (teeny__read_file(path, &file, &size, msg, sizeof msg) != TEENY_OK) {
        if (errno == ENOENT)
            return 0; /* a plain miss */
        goto done;
    }
    why = "truncated, padded or not an entry";
    if (size < CACHE_HEADER || memcmp(file, CACHE_MAGIC, 8) != 0)
        goto done;
    names_len = get_le32(file + 12);
    payload_len = (uint64_t)get_le32(file + 16) | (uint64_t)get_le32(file + 20) << 32;
    /* every length against the file size before use */
    if (get_le32(file + 8) != key_len || key_len > CACHE_KEY_MAX || names_len > CACHE_NAMES_MAX ||
        payload_len == 0 || payload_len != size - CACHE_HEADER - key_len - names_len ||
        size < CACHE_HEADER + key_len + names_len)
        goto done;
    why = "corrupt header or key";
    if (header_crc(file, (const char *)file + CACHE_HEADER, key_len, (const char *)file + CACHE_HEADER + key_len,
                   names_len) != get_le32(file + 28))
        goto done;
    why = "made for another build (key differs)";
    if (memcmp(file + CACHE_HEADER, key, key_len) != 0)
        goto done;
    why = "corrupt binary (checksum)";
    if (crc((uint32_t)crc32(0, Z_NULL, 0), file + size - payload_len, (size_t)payload_len) != get_le32(file + 24))
        goto done;
    why = "out of host memory";
    *bin = teeny__malloc((size_t)payload_len);
    *names = teeny__malloc(names_len + 1);
    if (!*bin || !*names)
        goto done;
    memcpy(*bin, file + size - payload_len, (size_t)payload_len);
    memcpy(*names, file + CACHE_HEADER + key_len, names_len);
    (*names)[names_len] = '\0';
    *len = (size_t)payload_len;
    ok = 1;
done:
    teeny__free(file);
    if (!ok) {
        teeny__log(TEENY_LOG_WARN, "kernel cache entry %s: %s; rebuilding it", path, why);
        teeny__free(*bin);
        teeny__free(*names);
        *bin = NULL;
        *names = NULL;
    }
    return ok;
}

/* ---- kernel names ---- */

/* Whether two ';'-separated lists of kernel names hold the same names, in
 * any order: Mesa's rusticl lists a program built from a binary in another
 * order than the same program built from source. */
static int same_names(const char *a, const char *b)
{
    size_t na = 1, nb = 1;
    for (const char *s = a; *s; s++)
        na += *s == ';';
    for (const char *s = b; *s; s++)
        nb += *s == ';';
    if (na != nb)
        return 0;
    for (const char *s = a; *s;) {
        size_t len = strcspn(s, ";");
        int found = 0;
        for (const char *t = b; *t && !found;) {
            size_t tl = strcspn(t, ";");
            found = tl == len && !strncmp(s, t, len);
            t += tl + (t[tl] == ';');
        }
        if (!found)
            return 0;
        s += len + (s[len] == ';');
    }
    return 1;
}

static int ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* The next token "word" in s at or after p (not part of a longer
 * identifier; "__kernel" counts as "kernel"), or NULL. */
static const char *next_token(const char *s, const char *p, const char *word)
{
    size_t n = strlen(word);
    for (; (p = strstr(p, word)) != NULL; p += n)
        if ((p == s || !isalnum((unsigned char)p[-1])) && !ident_char(p[n]))
            return p;
    return NULL;
}

/* Whether every kernel in names (";"-separated) is declared in src, the
 * family's source: "kernel" followed by "void NAME" (attributes between
 * them are skipped). These are the names the family expects; the names
 * stored in a cache entry come from the same file as its binary, so an
 * entry holding another family's binary with that family's names passes
 * every other check. A comment that looks like a declaration only makes
 * this looser. */
static int declared_in(const char *src, const char *names)
{
    for (const char *s = names; *s;) {
        size_t len = strcspn(s, ";");
        int found = 0;
        for (const char *k = src; !found && (k = next_token(src, k, "kernel")) != NULL; k += 6) {
            const char *v = next_token(src, k + 6, "void");
            if (!v)
                break;
            for (v += 4; isspace((unsigned char)*v); v++)
                ;
            found = !strncmp(v, s, len) && !ident_char(v[len]);
        }
        if (!found)
            return 0;
        s += len + (s[len] == ';');
    }
    return 1;
}

int teeny__cache_names_ok(const char *have, const char *stored, const char *src)
{
    return same_names(have, stored) && declared_in(src, have);
}

void teeny__cache_store(const char *dir, const char *path, const char *key, const char *names,
                        const unsigned char *bin, size_t len)
{
    unsigned char head[CACHE_HEADER];
    size_t key_len = strlen(key), names_len = strlen(names);
    char msg[512];
    if (mkdir_p(dir) != 0) {
        teeny__log(TEENY_LOG_INFO, "kernel cache: cannot create %s: %s", dir, strerror(errno));
        return;
    }
    memcpy(head, CACHE_MAGIC, 8);
    put_le32(head + 8, (uint32_t)key_len);
    put_le32(head + 12, (uint32_t)names_len);
    put_le32(head + 16, (uint32_t)((uint64_t)len & 0xffffffffu));
    put_le32(head + 20, (uint32_t)((uint64_t)len >> 32));
    put_le32(head + 24, crc((uint32_t)crc32(0, Z_NULL, 0), bin, len));
    put_le32(head + 28, header_crc(head, key, key_len, names, names_len));
    {
        const void *parts[4] = {head, key, names, bin};
        size_t lens[4] = {CACHE_HEADER, key_len, names_len, len};
        if (teeny__write_file_atomic_msg(path, parts, lens, 4, msg, sizeof msg) != TEENY_OK)
            teeny__log(TEENY_LOG_INFO, "kernel cache: cannot write %s: %s", path, msg);
    }
}

int teeny__cache_key(const teeny_ctx *ctx, const char *dir, const char *src, const char *full_options,
                     char **key, char *path, size_t path_cap)
{
    /* the key in full; the file name is a hash of it */
    uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x84222325cbf29ce4ULL, k1, k2;
    size_t cap;
    h1 = hash_str(h1, src);
    h2 = hash_str(h2, src);
    cap = strlen(full_options) + strlen(ctx->info.device_name) + strlen(ctx->info.platform_name) +
          strlen(ctx->info.driver_version) + strlen(teeny_version_string()) + 160;
    if (!(*key = teeny__malloc(cap)))
        return 0;
    snprintf(*key, cap, "teenycl %s\nsource %016llx%016llx\noptions %s\ndevice %s\nplatform %s\ndriver %s\n",
             teeny_version_string(), (unsigned long long)h1, (unsigned long long)h2, full_options,
             ctx->info.device_name, ctx->info.platform_name, ctx->info.driver_version);
    k1 = hash_str(0xcbf29ce484222325ULL, *key);
    k2 = hash_str(0x84222325cbf29ce4ULL, *key);
    snprintf(path, path_cap, "%s/%016llx%016llx.bin", dir, (unsigned long long)k1, (unsigned long long)k2);
    return 1;
}
