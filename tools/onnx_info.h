/*
 * onnx_info.h -- a model's graph inputs and outputs as the file declares
 * them (teeny_onnx_inspect_io), printed the same way by teeny-info --onnx
 * and teeny-run --info: one line each, "input" or "output", the name, the
 * element type and the shape, a symbolic dimension by its name ("?" when
 * it has none):
 *
 *   input   img           float  [batch, 3, 4, 4]
 *   output  /l2/probs:0   float  [batch, 3, 4, 4]
 *
 * Header-only (check-install compiles tools/teeny-info.c alone).
 */
#ifndef TEENY_TOOLS_ONNX_INFO_H
#define TEENY_TOOLS_ONNX_INFO_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "teenycl_onnx.h"

typedef struct {
    int is_output;
    char name[256];  /* cut at 255 bytes */
    char type[32];
    char shape[512]; /* "[batch, 3, 4, 4]", "[]" (a scalar), "(no shape declared)" */
    int elem_type;   /* TensorProto.DataType (0: not declared) */
    int ndim;        /* -1: no shape declared */
    int64_t dims[TEENY_ONNX_MAX_DIMS]; /* the first ndim (at most TEENY_ONNX_MAX_DIMS); -1 symbolic */
} onnx_io_row;

typedef struct {
    onnx_io_row *rows;
    int n, cap, failed;
} onnx_io_rows;

static inline void onnx_io_collect(const teeny_onnx_io_report *r, void *user)
{
    onnx_io_rows *t = user;
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        onnx_io_row *grown = realloc(t->rows, (size_t)cap * sizeof *grown);
        if (!grown) {
            t->failed = 1;
            return;
        }
        t->rows = grown;
        t->cap = cap;
    }
    onnx_io_row *row = &t->rows[t->n++];
    size_t len = 0;
    row->is_output = r->is_output;
    snprintf(row->name, sizeof row->name, "%s", r->name);
    snprintf(row->type, sizeof row->type, "%s", r->elem_type_name);
    row->elem_type = r->elem_type;
    row->ndim = r->ndim;
    for (int d = 0; d < r->ndim && d < TEENY_ONNX_MAX_DIMS; d++)
        row->dims[d] = r->dims[d];
    if (r->ndim < 0) {
        snprintf(row->shape, sizeof row->shape, "(no shape declared)");
        return;
    }
    row->shape[len++] = '[';
    for (int d = 0; d < r->ndim; d++) {
        const char *sep = d ? ", " : "";
        if (len > sizeof row->shape - 80) { /* room for one more and the end */
            len += (size_t)snprintf(row->shape + len, sizeof row->shape - len, ", ...");
            break;
        }
        if (r->dims[d] >= 0)
            len += (size_t)snprintf(row->shape + len, sizeof row->shape - len, "%s%lld", sep, (long long)r->dims[d]);
        else
            len += (size_t)snprintf(row->shape + len, sizeof row->shape - len, "%s%.60s", sep,
                                    r->dim_names[d][0] ? r->dim_names[d] : "?");
    }
    snprintf(row->shape + len, sizeof row->shape - len, "]");
}

/* The declared inputs and outputs of the model at path into *rows (free
 * rows->rows). TEENY_OK, or the library's status (its message in
 * teeny_last_error(ctx)). */
static inline teeny_status onnx_io_read(teeny_ctx *ctx, const char *path, onnx_io_rows *rows)
{
    memset(rows, 0, sizeof *rows);
    teeny_status st = teeny_onnx_inspect_io(ctx, path, onnx_io_collect, rows);
    return st == TEENY_OK && rows->failed ? TEENY_ERR_NOMEM : st;
}

/* One line per row, each after indent. */
static inline void onnx_io_print(const onnx_io_rows *rows, const char *indent, FILE *f)
{
    int width = 4;
    for (int i = 0; i < rows->n; i++)
        if ((int)strlen(rows->rows[i].name) > width)
            width = (int)strlen(rows->rows[i].name);
    for (int i = 0; i < rows->n; i++) {
        const onnx_io_row *r = &rows->rows[i];
        fprintf(f, "%s%-7s %-*s  %-6s %s\n", indent, r->is_output ? "output" : "input", width, r->name, r->type,
                r->shape);
    }
}

#endif
