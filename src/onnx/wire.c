/*
 * wire.c -- protobuf parsing of untrusted ONNX bytes. protobuf-c unpacks
 * nested messages by recursion with no depth limit and allocates a struct
 * per message, so a few bytes per level can exhaust the stack, and empty
 * submessages cost ~100x their wire size in memory. Before protobuf-c
 * sees the bytes, one iterative pass over the wire format, driven by the
 * generated descriptors, bounds the nesting depth (OX_MAX_DEPTH) and
 * estimates what unpacking will allocate (refused past 256 MiB + 2x the
 * input). Host memory comes from teeny__malloc, so allocation faults are
 * injectable like everywhere else.
 */
#include <string.h>

#include "onnx_internal.h"

static void *pb_alloc(void *data, size_t size)
{
    (void)data;
    return teeny__malloc(size ? size : 1);
}

static void pb_free(void *data, void *p)
{
    (void)data;
    teeny__free(p);
}

static ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, NULL};

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (*p >= end)
            return 0;
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

typedef struct {
    const uint8_t *end;
    const ProtobufCMessageDescriptor *desc;
} frame;

/* Bytes unpacking a length-delimited field of len bytes will allocate. */
static uint64_t delimited_cost(const ProtobufCFieldDescriptor *f, uint64_t len)
{
    if (!f)
        return len + 64; /* kept as an unknown field */
    if (f->label == PROTOBUF_C_LABEL_REPEATED && f->type != PROTOBUF_C_TYPE_STRING &&
        f->type != PROTOBUF_C_TYPE_BYTES)
        return len * 8 + 16; /* packed scalars: at most one per byte, 8 bytes each */
    return len + 1 + 2 * sizeof(void *) + sizeof(ProtobufCBinaryData);
}

static teeny_status scan(teeny_ctx *ctx, const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t size,
                         uint64_t *cost)
{
    frame st[OX_MAX_DEPTH];
    int depth = 0;
    const uint8_t *p = data;
    st[0] = (frame){data + size, desc};
    *cost = desc->sizeof_message;
    while (depth >= 0) {
        uint64_t tag, v;
        if (p == st[depth].end) {
            depth--;
            continue;
        }
        if (!read_varint(&p, st[depth].end, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
            return teeny__error(ctx, TEENY_ERR_FORMAT, "bad field tag at byte %lld", (long long)(p - data));
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field(st[depth].desc, (unsigned)(tag >> 3));
        size_t left = (size_t)(st[depth].end - p);
        switch (tag & 7) {
        case 0:
            if (!read_varint(&p, st[depth].end, &v))
                return teeny__error(ctx, TEENY_ERR_FORMAT, "truncated varint at byte %lld", (long long)(p - data));
            *cost += 16;
            break;
        case 1:
        case 5:
            if (left < ((tag & 7) == 1 ? 8u : 4u))
                return teeny__error(ctx, TEENY_ERR_FORMAT, "truncated fixed-size field at byte %lld",
                                    (long long)(p - data));
            p += (tag & 7) == 1 ? 8 : 4;
            *cost += 16;
            break;
        case 2:
            if (!read_varint(&p, st[depth].end, &v) || v > (uint64_t)(st[depth].end - p))
                return teeny__error(ctx, TEENY_ERR_FORMAT, "a length-delimited field at byte %lld runs past its end",
                                    (long long)(p - data));
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth + 1 >= OX_MAX_DEPTH)
                    return teeny__error(ctx, TEENY_ERR_FORMAT, "messages nest deeper than %d levels", OX_MAX_DEPTH);
                const ProtobufCMessageDescriptor *sub = f->descriptor;
                *cost += sub->sizeof_message + 2 * sizeof(void *);
                st[++depth] = (frame){p + v, sub};
                continue;
            }
            *cost += delimited_cost(f, v);
            p += v;
            break;
        default:
            return teeny__error(ctx, TEENY_ERR_FORMAT, "wire type %d (groups) at byte %lld", (int)(tag & 7),
                                (long long)(p - data));
        }
    }
    return TEENY_OK;
}

teeny_status teeny__ox_unpack(teeny_ctx *ctx, const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t size,
                       ProtobufCMessage **out)
{
    uint64_t cost = 0, limit = ((uint64_t)256 << 20) + 2 * (uint64_t)size;
    *out = NULL;
    teeny_status st = scan(ctx, desc, data, size, &cost);
    if (st == TEENY_ERR_FORMAT && desc == &onnx__model_proto__descriptor) /* a JPEG, a text file, a .npy ... */
        return teeny__error(ctx, st, "not an ONNX model (protobuf parse failed: %s)", teeny_last_error(ctx));
    if (st != TEENY_OK)
        return st;
    if (cost > limit)
        return teeny__error(ctx, TEENY_ERR_RANGE, "%zu bytes would unpack into about %llu bytes of host memory "
                            "(limit %llu)", size, (unsigned long long)cost, (unsigned long long)limit);
    *out = protobuf_c_message_unpack(desc, &pb_allocator, size, data);
    if (!*out)
        return teeny__error(ctx, TEENY_ERR_FORMAT, "not a valid %s message (or out of host memory)", desc->name);
    return TEENY_OK;
}

void teeny__ox_free_unpacked(ProtobufCMessage *m)
{
    if (m)
        protobuf_c_message_free_unpacked(m, &pb_allocator);
}
