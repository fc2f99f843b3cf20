/*
 * params.c -- binding an ONNX weight (an initializer or constant) to a
 * graph node's parameter or state slot: its values written, the slot named
 * after it (checkpoints and teeny_onnx_set_trainable use the ONNX name),
 * frozen when the caller asks, and listed in the model. A weight that
 * feeds several nodes (torch.export merges equal initializers; weight
 * tying) fills its first slot and the later slots share that parameter
 * through the graph's tie, provided they would hold the same values.
 */
#include <string.h>

#include "onnx_internal.h"

/* A later use of weight v: parameter slot `slot` of n shares the parameter
 * its first use made (the graph's tie: one tensor, gradients summed over
 * the uses, one checkpoint entry under v's name), provided the slot would
 * hold exactly the values that parameter holds (want, numel elements): a
 * use that transposes or broadcasts the weight differently cannot share
 * it. Statistics (state slots) are never shared. */
static teeny_status bind_shared(ox_import *im, ox_value *v, teeny_node n, int is_state, int slot, const float *want,
                                int64_t numel)
{
    if (is_state || v->bound_state)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "\"%.80s\" fills two slots, one of them batch-norm "
                              "statistics (only parameters can be shared)", v->name);
    teeny_tensor *shared = teeny__graph_slot_tensor(im->g, v->bound_node, 0, v->bound_slot);
    if (!shared)
        return teeny__ox_fail(im, TEENY_ERR_STATE, "internal: the parameter \"%.80s\" is missing", v->name);
    if (teeny_tensor_numel(shared) != numel)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "\"%.80s\" fills parameter slots of %lld and %lld elements "
                              "(a shared weight needs the same values in each)", v->name,
                              (long long)teeny_tensor_numel(shared), (long long)numel);
    float *have = teeny__malloc((size_t)numel * sizeof *have);
    if (!have)
        return teeny__ox_fail(im, TEENY_ERR_NOMEM, "out of host memory");
    teeny_status st = teeny_tensor_read(shared, have, (size_t)numel);
    int same = st == TEENY_OK && !memcmp(have, want, (size_t)numel * sizeof *have);
    teeny__free(have);
    if (st != TEENY_OK)
        return teeny__ox_fail(im, st, "\"%.80s\": %s", v->name, teeny_last_error(im->ctx));
    if (!same)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "\"%.80s\" fills parameter slots in different layouts (a "
                              "transposed or broadcast copy in one of them); a shared weight needs the same values "
                              "in each", v->name);
    if ((st = teeny__graph_param_tie(im->g, n, slot, v->bound_node, v->bound_slot)) != TEENY_OK)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "\"%.80s\" cannot be shared: %s", v->name,
                              teeny_last_error(im->ctx));
    return TEENY_OK;
}

teeny_status teeny__ox_bind(ox_import *im, int vidx, teeny_node n, int is_state, int slot, const float *data)
{
    ox_value *v = &im->vals[vidx];
    teeny_status st;
    if (v->c.type != OX_F32)
        return teeny__ox_fail(im, TEENY_ERR_UNSUPPORTED, "weight \"%.80s\" is %s, not float", v->name,
                       teeny__ox_type_name(v->c.onnx_type));
    teeny_tensor *t = teeny__graph_slot_tensor(im->g, n, is_state, slot);
    if (!t || (!data && teeny_tensor_numel(t) != v->c.numel))
        return teeny__ox_fail(im, TEENY_ERR_STATE, "internal: no %s slot of %lld elements for \"%.80s\"",
                       is_state ? "state" : "parameter", (long long)v->c.numel, v->name);
    if (v->param_uses++)
        return bind_shared(im, v, n, is_state, slot, data ? data : v->c.data, teeny_tensor_numel(t));
    v->bound_node = n;
    v->bound_slot = slot;
    v->bound_state = is_state;
    if ((st = teeny_tensor_write(t, data ? data : v->c.data, (size_t)teeny_tensor_numel(t))) != TEENY_OK ||
        (st = teeny__graph_slot_alias(im->g, n, is_state, slot, v->name)) != TEENY_OK ||
        (!is_state && im->p->freeze && (st = teeny__graph_param_freeze(im->g, n, slot, 1)) != TEENY_OK))
        return teeny__ox_fail(im, st, "\"%.80s\": %s", v->name, teeny_last_error(im->ctx));
    if (is_state)
        return TEENY_OK;
    teeny_onnx_model *m = im->m;
    if (!teeny__grow((void **)&m->params, &m->cap_params, m->n_params, sizeof *m->params) ||
        !(m->params[m->n_params].name = teeny__strdup(v->name)))
        return teeny__ox_fail(im, TEENY_ERR_NOMEM, "out of host memory");
    m->params[m->n_params].node = n;
    m->params[m->n_params++].slot = slot;
    return TEENY_OK;
}
