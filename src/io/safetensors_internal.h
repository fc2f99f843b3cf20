/*
 * safetensors_internal.h -- private to the safetensors writer
 * (safetensors_write.c) and reader (safetensors.c): the format's limits,
 * the checksum metadata keys both sides agree on, and the little-endian
 * and string-copy helpers. The format itself is described in
 * safetensors.c.
 */
#ifndef TEENY_SAFETENSORS_INTERNAL_H
#define TEENY_SAFETENSORS_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "../internal.h"

#define ST_HEADER_MAX 100000000ULL /* Python's safetensors limit */
#define ST_MAX_OFFSET (1ULL << 53) /* exact in a JSON double */
#define CHECKSUM_KEY "teenycl_checksum"
#define HEADER_CHECKSUM_KEY "teenycl_header_checksum"
#define HEADER_CHECKSUM_PATTERN "\"" HEADER_CHECKSUM_KEY "\":\""

static inline int host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static inline uint64_t get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

#endif /* TEENY_SAFETENSORS_INTERNAL_H */
