/*
 * attrs.c -- a node's attributes as the op handlers read them: typed,
 * with defaults, every one the handler does not know refused, and axes
 * normalized; errors name the node and the attribute (values.c's
 * teeny__ox_fail).
 */
#include <stdio.h>
#include <string.h>

#include "onnx_internal.h"

#define S(x) ((x) ? (x) : "")

/* ---- attributes ---- */

const Onnx__AttributeProto *teeny__ox_attr(const ox_import *im, const char *name)
{
    for (size_t i = 0; i < im->node->n_attribute; i++)
        if (!strcmp(S(im->node->attribute[i]->name), name))
            return im->node->attribute[i];
    return NULL;
}

teeny_status teeny__ox_attrs_allowed(ox_import *im, const char *const *allowed)
{
    for (size_t i = 0; i < im->node->n_attribute; i++) {
        const Onnx__AttributeProto *a = im->node->attribute[i];
        int ok = 0;
        for (int k = 0; allowed && allowed[k] && !ok; k++)
            ok = !strcmp(S(a->name), allowed[k]);
        if (!ok)
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute %.60s is not supported", S(a->name));
        if (a->ref_attr_name && *a->ref_attr_name)
            return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute %.60s refers to a function attribute", a->name);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(S(im->node->attribute[j]->name), a->name))
                return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute %.60s is given twice", a->name);
    }
    return TEENY_OK;
}

/* a's type is want (or unset with the matching field present). */
static int attr_is(const Onnx__AttributeProto *a, int want)
{
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
        return (int)a->type == want;
    switch (want) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: return a->has_i;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: return a->has_f;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: return a->has_s;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: return a->n_ints > 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: return a->n_floats > 0;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: return a->t != NULL;
    default: return 0;
    }
}

/* The attribute name into *a (NULL when the node has none); one of
 * another type than type (type_name) fails. */
static teeny_status attr_typed(ox_import *im, const char *name, int type, const char *type_name,
                               const Onnx__AttributeProto **a)
{
    *a = teeny__ox_attr(im, name);
    if (*a && !attr_is(*a, type))
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "attribute %s is not of type %s", name, type_name);
    return TEENY_OK;
}

teeny_status teeny__ox_attr_int(ox_import *im, const char *name, int64_t def, int64_t *out)
{
    const Onnx__AttributeProto *a;
    teeny_status st = attr_typed(im, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, "INT", &a);
    *out = st == TEENY_OK && a ? a->i : def;
    return st;
}

teeny_status teeny__ox_attr_float(ox_import *im, const char *name, float def, float *out)
{
    const Onnx__AttributeProto *a;
    teeny_status st = attr_typed(im, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, "FLOAT", &a);
    *out = st == TEENY_OK && a ? a->f : def;
    return st;
}

teeny_status teeny__ox_attr_ints(ox_import *im, const char *name, int max, int64_t *out, int *n)
{
    const Onnx__AttributeProto *a;
    teeny_status st = attr_typed(im, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, "INTS", &a);
    *n = -1;
    if (st != TEENY_OK || !a)
        return st;
    if (a->n_ints > (size_t)max)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute %s has %zu values (at most %d supported)", name,
                       a->n_ints, max);
    *n = (int)a->n_ints;
    if (a->n_ints) /* an INTS attribute with no values has a NULL array */
        memcpy(out, a->ints, a->n_ints * sizeof *out);
    return TEENY_OK;
}

teeny_status teeny__ox_attr_string(ox_import *im, const char *name, const char *def, char *out, size_t cap)
{
    const Onnx__AttributeProto *a;
    teeny_status st = attr_typed(im, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, "STRING", &a);
    snprintf(out, cap, "%s", def);
    if (st != TEENY_OK || !a)
        return st;
    if (a->s.len >= cap || (a->s.len && memchr(a->s.data, 0, a->s.len))) /* an empty string has NULL data */
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "attribute %s: value not supported", name);
    if (a->s.len)
        memcpy(out, a->s.data, a->s.len);
    out[a->s.len] = 0;
    return TEENY_OK;
}

teeny_status teeny__ox_axis(ox_import *im, const char *what, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank)
        return teeny__ox_fail(im, TEENY_ERR_FORMAT, "%s %lld is outside [-%d, %d)", what, (long long)axis, rank, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return TEENY_OK;
}
