/*
 * test_onnx_ops.c -- the ONNX importer's op registry (src/onnx/ops.def)
 * through its public view (teeny_onnx_op_count, teeny_onnx_op_info): the
 * entries are ops.def's lines in order, no op type twice, every opset
 * range inside the model-wide 6..24, a bad index refused; and README.md's
 * table of ONNX ops ("Importing ONNX models") names every op type the
 * registry holds and none it lacks. No device needed for those.
 *
 * TCase fold: the shape checks folded at import (src/onnx/logic.c, Size in
 * fold.c) on crafted models (tests/onnx_craft.h) whose outputs are
 * constants, read back without a plan: each op's values against hand-
 * computed ones, with broadcasting, Mod's two sign rules on negative
 * operands, Where's inf and NaN carried as they are, Range's exact integer
 * counts, If taking either branch (constant or run-time values), and the
 * refusals (a run-time operand, a run-time If condition, a failing branch)
 * by status and by the words of their message.
 */
#include <math.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "onnx_craft.h"
#include "teenycl_onnx.h"

/* ops.def's rows name the model-wide range (onnx_internal.h; teenycl_onnx.h states it) */
#define OX_MIN_OPSET 6
#define OX_MAX_OPSET 24

static const struct {
    const char *op_type;
    int since, until;
} def_rows[] = {
#define XX(type, fn, since, until) {type, since, until},
#include "onnx/ops.def"
#undef XX
};
#define N_DEF ((int)(sizeof def_rows / sizeof *def_rows))

START_TEST(test_onnx_ops_registry)
{
    int n = teeny_onnx_op_count();
    ck_assert_int_eq(n, N_DEF);
    for (int i = 0; i < n; i++) {
        const char *op = NULL;
        int since = -1, until = -1;
        ck_assert_int_eq(teeny_onnx_op_info(i, &op, &since, &until), TEENY_OK);
        ck_assert_msg(op && !strcmp(op, def_rows[i].op_type), "entry %d: %s, ops.def: %s", i, op ? op : "NULL",
                      def_rows[i].op_type);
        ck_assert_msg(since == def_rows[i].since && until == def_rows[i].until, "%s: opsets %d..%d", op, since, until);
        ck_assert_msg(OX_MIN_OPSET <= since && since <= until && until <= OX_MAX_OPSET, "%s: opsets %d..%d", op, since,
                      until);
        for (int j = 0; j < i; j++) {
            const char *other;
            ck_assert_int_eq(teeny_onnx_op_info(j, &other, NULL, NULL), TEENY_OK);
            ck_assert_msg(strcmp(op, other), "entries %d and %d are both %s", j, i, op);
        }
    }
    ck_assert_int_eq(teeny_onnx_op_info(0, NULL, NULL, NULL), TEENY_OK);
    const char *op = "untouched";
    int since = -7;
    ck_assert_int_eq(teeny_onnx_op_info(n, &op, &since, NULL), TEENY_ERR_ARG);
    ck_assert_int_eq(teeny_onnx_op_info(-1, &op, &since, NULL), TEENY_ERR_ARG);
    ck_assert_str_eq(op, "untouched");
    ck_assert_int_eq(since, -7);
    ck_assert_msg(strstr(teeny_last_error(NULL), "teeny_onnx_op_info: index -1"), "%s", teeny_last_error(NULL));
}
END_TEST

/* ---- README.md's table ---- */

#define MAX_NAMES 256

typedef struct {
    char *names[MAX_NAMES];
    int n;
} name_list;

static void add_name(name_list *l, const char *s, size_t len)
{
    for (int i = 0; i < l->n; i++)
        if (strlen(l->names[i]) == len && !strncmp(l->names[i], s, len))
            return;
    ck_assert_int_lt(l->n, MAX_NAMES);
    char *copy = malloc(len + 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, s, len);
    copy[len] = 0;
    l->names[l->n++] = copy;
}

static int has_name(const name_list *l, const char *s)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->names[i], s))
            return 1;
    return 0;
}

/* The op types a row's first cell names. The cell lists ops, separated by
 * ",", ";", "/" or "->" (a fused chain); what stands in backticks, (...)
 * or [...] is a remark or a chain's optional step; each item's first word
 * is an op type where it starts with a capital ("MatMul of run-time
 * values" names MatMul; "or of a constant ...", "x * Sigmoid" name none). */
static void cell_ops(const char *cell, size_t len, name_list *l)
{
    char text[2048];
    size_t n = 0;
    int depth = 0, tick = 0;
    for (size_t i = 0; i < len && n + 1 < sizeof text; i++) {
        char c = cell[i];
        if (c == '`')
            tick = !tick;
        else if (tick)
            continue;
        else if (c == '(' || c == '[')
            depth++;
        else if ((c == ')' || c == ']') && depth > 0)
            depth--;
        else if (!depth)
            text[n++] = c == ',' || c == ';' || c == '/' || (c == '-' && i + 1 < len && cell[i + 1] == '>') ? '|' : c;
    }
    text[n] = 0;
    for (char *item = text, *end; *item; item = *end ? end + 1 : end) {
        end = strchr(item, '|');
        if (!end)
            end = item + strlen(item);
        while (item < end && (*item == ' ' || *item == '>'))
            item++;
        size_t w = 0;
        while (item + w < end && isalpha((unsigned char)item[w]))
            w++;
        if (w && isupper((unsigned char)item[0]))
            add_name(l, item, w);
    }
}

/* The first cells of README.md's "| ONNX op |" table. */
static void readme_ops(name_list *l)
{
    FILE *f = fopen("README.md", "r");
    char line[8192];
    int in_table = 0;
    ck_assert_msg(f != NULL, "README.md: not found (run from the repository root)");
    while (fgets(line, sizeof line, f)) {
        if (!in_table) {
            in_table = !strncmp(line, "| ONNX op |", 11);
            continue;
        }
        if (line[0] != '|')
            break;
        const char *cell = line + 1, *bar = strchr(cell, '|');
        if (bar && strncmp(cell, "---", 3))
            cell_ops(cell, (size_t)(bar - cell), l);
    }
    fclose(f);
    ck_assert_msg(in_table && l->n > 0, "README.md: no \"| ONNX op |\" table");
}

START_TEST(test_onnx_ops_readme)
{
    name_list readme = {{0}, 0}, registry = {{0}, 0};
    readme_ops(&readme);
    for (int i = 0; i < teeny_onnx_op_count(); i++) {
        const char *op;
        ck_assert_int_eq(teeny_onnx_op_info(i, &op, NULL, NULL), TEENY_OK);
        add_name(&registry, op, strlen(op));
    }
    char missing[1024] = "", extra[1024] = "";
    for (int i = 0; i < registry.n; i++)
        if (!has_name(&readme, registry.names[i]))
            snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s", registry.names[i]);
    for (int i = 0; i < readme.n; i++)
        if (!has_name(&registry, readme.names[i]))
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " %s", readme.names[i]);
    ck_assert_msg(!*missing, "README.md's ONNX op table lacks:%s", missing);
    ck_assert_msg(!*extra, "README.md's ONNX op table lists ops the registry (src/onnx/ops.def) lacks:%s", extra);
    for (int i = 0; i < readme.n; i++)
        free(readme.names[i]);
    for (int i = 0; i < registry.n; i++)
        free(registry.names[i]);
}
END_TEST

/* ---- folded at import ---- */

static const int64_t D0[1] = {0}, D1[1] = {1}, D2[1] = {2}, D3[1] = {3}, D4[1] = {4}, D6[1] = {6};
static const int64_t D2x3[2] = {2, 3}, D2x2[2] = {2, 2}, D2x1[2] = {2, 1};

/* m (freed) loaded at its own batch: the status; *out the model, or NULL. */
static teeny_status fold_load(oc_model *m, teeny_onnx_model **out)
{
    size_t size;
    unsigned char *bytes = oc_pack(m, &size);
    oc_free(m);
    *out = (teeny_onnx_model *)bytes; /* must become NULL on failure */
    teeny_status st = teeny_onnx_load_memory(th_ctx(), bytes, size, NULL, out);
    free(bytes);
    ck_assert_msg(st == TEENY_OK ? *out != NULL : *out == NULL, "*out not NULL after a failure");
    return st;
}

/* Output i of model is a folded constant of shape dims[ndim] holding want. */
static void expect_folded(const char *what, teeny_onnx_model *model, int i, int ndim, const int64_t *dims,
                          const float *want)
{
    int64_t shape[TEENY_ONNX_MAX_DIMS], n = 1;
    int got_ndim;
    teeny_node node;
    ck_assert_int_eq(teeny_onnx_output(model, i, NULL, &node, &got_ndim, shape), TEENY_OK);
    ck_assert_msg(node == -1, "%s: output %d is a graph node, not folded", what, i);
    ck_assert_msg(got_ndim == ndim, "%s: output %d has rank %d, want %d", what, i, got_ndim, ndim);
    for (int d = 0; d < ndim; d++) {
        ck_assert_msg(shape[d] == dims[d], "%s: output %d dimension %d is %lld, want %lld", what, i, d,
                      (long long)shape[d], (long long)dims[d]);
        n *= dims[d];
    }
    float got[64];
    ck_assert_int_le(n, 64);
    for (int64_t k = 0; k < n; k++)
        got[k] = NAN; /* poisoned: every element must be written */
    ck_assert_int_eq(teeny_onnx_output_read(model, NULL, i, got, (size_t)n), TEENY_OK);
    for (int64_t k = 0; k < n; k++)
        ck_assert_msg(isnan(want[k]) ? isnan(got[k]) : got[k] == want[k], "%s: output %d element %lld is %g, want %g",
                      what, i, (long long)k, got[k], want[k]);
}

/* m fails to load with want, its message holding word1 and word2 (NULL: none). */
static void expect_refused(const char *what, oc_model *m, teeny_status want, const char *word1, const char *word2)
{
    teeny_onnx_model *model;
    teeny_status st = fold_load(m, &model);
    const char *msg = teeny_last_error(th_ctx());
    ck_assert_msg(st == want, "%s: %s, want %s (%s)", what, teeny_status_name(st), teeny_status_name(want), msg);
    ck_assert_msg(strstr(msg, word1) && (!word2 || strstr(msg, word2)), "%s: the message \"%s\" lacks \"%s\"%s%s",
                  what, msg, word1, word2 ? " or " : "", word2 ? word2 : "");
}

/* A model of op(a, b) over int64 initializers a [2, 3] and b [3] (broadcast over the rows). */
static oc_model *binary_i64(const char *op, const int64_t *a, const int64_t *b)
{
    oc_model *m = oc_new(17);
    oc_init_i64(m, "a", 2, D2x3, a);
    oc_init_i64(m, "b", 1, D3, b);
    oc_node(m, op, "a,b", "y");
    oc_output(m, "y");
    return m;
}

START_TEST(test_onnx_fold_compare)
{
    static const int64_t a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {2, 5, 3};
    static const struct {
        const char *op;
        float want[6];
    } cases[] = {
        {"Equal", {0, 0, 1, 0, 1, 0}},          {"Less", {1, 1, 0, 0, 0, 0}},
        {"Greater", {0, 0, 0, 1, 0, 1}},        {"LessOrEqual", {1, 1, 1, 0, 1, 0}},
        {"GreaterOrEqual", {0, 0, 1, 1, 1, 1}},
    };
    teeny_onnx_model *model;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ck_assert_int_eq(fold_load(binary_i64(cases[c].op, a, b), &model), TEENY_OK);
        expect_folded(cases[c].op, model, 0, 2, D2x3, cases[c].want);
        teeny_onnx_destroy(model);
    }
    /* floats: NaN equals nothing, -0 equals 0; a scalar broadcast against [3] */
    static const float fa[3] = {1.5f, NAN, -0.0f}, fb[3] = {1.5f, NAN, 0.0f}, two = 2.0f;
    oc_model *m = oc_new(17);
    oc_init_f32(m, "a", 1, D3, fa);
    oc_init_f32(m, "b", 1, D3, fb);
    oc_init_f32(m, "two", 0, NULL, &two);
    oc_node(m, "Equal", "a,b", "eq");
    oc_node(m, "Less", "a,two", "lt");
    oc_node(m, "Greater", "two,a", "gt");
    oc_output(m, "eq");
    oc_output(m, "lt");
    oc_output(m, "gt");
    ck_assert_int_eq(fold_load(m, &model), TEENY_OK);
    expect_folded("Equal, floats", model, 0, 1, D3, (const float[]){1, 0, 1});
    expect_folded("Less, a scalar B", model, 1, 1, D3, (const float[]){1, 0, 1});
    expect_folded("Greater, a scalar A", model, 2, 1, D3, (const float[]){1, 0, 1});
    teeny_onnx_destroy(model);
    /* operands of different types, shapes that do not broadcast */
    m = oc_new(17);
    oc_init_f32(m, "a", 1, D3, fa);
    oc_init_i64(m, "b", 1, D3, b);
    oc_node(m, "Equal", "a,b", "y");
    oc_output(m, "y");
    expect_refused("Equal, float and int64", m, TEENY_ERR_FORMAT, "node \"y\" (Equal)", "different types");
    m = oc_new(17);
    oc_init_i64(m, "a", 1, D2, a);
    oc_init_i64(m, "b", 1, D3, b);
    oc_node(m, "Less", "a,b", "y");
    oc_output(m, "y");
    expect_refused("Less, [2] and [3]", m, TEENY_ERR_SHAPE, "node \"y\" (Less)", "broadcast");
}
END_TEST

START_TEST(test_onnx_fold_logic)
{
    static const uint8_t a[4] = {1, 1, 0, 0}, b[2] = {1, 0};
    oc_model *m = oc_new(17);
    teeny_onnx_model *model;
    oc_init_bool(m, "a", 2, D2x2, a);
    oc_init_bool(m, "b", 1, D2, b);
    oc_node(m, "And", "a,b", "and");
    oc_node(m, "Or", "a,b", "or");
    oc_node(m, "Xor", "a,b", "xor");
    oc_node(m, "Not", "a", "not");
    oc_node(m, "Not", "and", "nand"); /* of a folded value */
    oc_output(m, "and");
    oc_output(m, "or");
    oc_output(m, "xor");
    oc_output(m, "not");
    oc_output(m, "nand");
    ck_assert_int_eq(fold_load(m, &model), TEENY_OK);
    expect_folded("And", model, 0, 2, D2x2, (const float[]){1, 0, 0, 0});
    expect_folded("Or", model, 1, 2, D2x2, (const float[]){1, 1, 1, 0});
    expect_folded("Xor", model, 2, 2, D2x2, (const float[]){0, 1, 1, 0});
    expect_folded("Not", model, 3, 2, D2x2, (const float[]){0, 0, 1, 1});
    expect_folded("Not(And)", model, 4, 2, D2x2, (const float[]){0, 1, 1, 1});
    teeny_onnx_destroy(model);
}
END_TEST

START_TEST(test_onnx_fold_mod)
{
    static const int64_t a[6] = {7, -7, 7, -7, 0, 5}, b[6] = {3, 3, -3, -3, 4, 5};
    static const int64_t ra[6] = {10, 11, 12, 13, 14, 15}, rb[3] = {4, 5, 6};
    static const float fa[4] = {5.5f, -5.5f, 5.5f, -5.5f}, fb[4] = {2, 2, -2, -2};
    teeny_onnx_model *model;
    oc_model *m = oc_new(17);
    oc_init_i64(m, "a", 1, D6, a);
    oc_init_i64(m, "b", 1, D6, b);
    oc_init_f32(m, "fa", 1, D4, fa);
    oc_init_f32(m, "fb", 1, D4, fb);
    oc_node(m, "Mod", "a,b", "python"); /* fmod 0: the divisor's sign */
    oc_node(m, "Mod", "a,b", "c");      /* fmod 1: the dividend's */
    oc_attr_int(m, "fmod", 1);
    oc_node(m, "Mod", "fa,fb", "f");
    oc_attr_int(m, "fmod", 1);
    oc_output(m, "python");
    oc_output(m, "c");
    oc_output(m, "f");
    ck_assert_int_eq(fold_load(m, &model), TEENY_OK);
    expect_folded("Mod fmod=0", model, 0, 1, D6, (const float[]){1, 2, -2, -1, 0, 0});
    expect_folded("Mod fmod=1", model, 1, 1, D6, (const float[]){1, -1, 1, -1, 0, 0});
    expect_folded("Mod fmod=1, floats", model, 2, 1, D4, (const float[]){1.5f, -1.5f, 1.5f, -1.5f});
    teeny_onnx_destroy(model);
    ck_assert_int_eq(fold_load(binary_i64("Mod", ra, rb), &model), TEENY_OK);
    expect_folded("Mod, broadcast", model, 0, 2, D2x3, (const float[]){2, 1, 0, 1, 4, 3});
    teeny_onnx_destroy(model);
    /* floats need fmod=1; an integer divisor 0 is refused, either fmod */
    m = oc_new(17);
    oc_init_f32(m, "fa", 1, D4, fa);
    oc_init_f32(m, "fb", 1, D4, fb);
    oc_node(m, "Mod", "fa,fb", "y");
    oc_output(m, "y");
    expect_refused("Mod fmod=0 of floats", m, TEENY_ERR_FORMAT, "node \"y\" (Mod)", "fmod=0 on floats");
    for (int fmod = 0; fmod < 2; fmod++) {
        m = binary_i64("Mod", ra, (const int64_t[]){4, 0, 6});
        oc_attr_int(m, "fmod", fmod);
        expect_refused("Mod by 0", m, TEENY_ERR_FORMAT, "node \"y\" (Mod)", "Mod by 0");
    }
}
END_TEST

START_TEST(test_onnx_fold_where)
{
    static const uint8_t cond2[2] = {1, 0}, cond3[3] = {1, 0, 1}, yes = 1, no = 0;
    static const int64_t x[3] = {1, 2, 3}, y = -1;
    static const float fx[3] = {INFINITY, 1, 2}, fy[3] = {0, NAN, 5};
    teeny_onnx_model *model;
    oc_model *m = oc_new(17);
    oc_init_bool(m, "c2", 2, D2x1, cond2);
    oc_init_bool(m, "c3", 1, D3, cond3);
    oc_init_i64(m, "x", 1, D3, x);
    oc_init_i64(m, "y", 0, NULL, &y);
    oc_init_f32(m, "fx", 1, D3, fx);
    oc_init_f32(m, "fy", 1, D3, fy);
    oc_node(m, "Where", "c2,x,y", "w"); /* [2, 1], [3] and a scalar: [2, 3] */
    oc_node(m, "Where", "c3,fx,fy", "wf");
    oc_output(m, "w");
    oc_output(m, "wf");
    ck_assert_int_eq(fold_load(m, &model), TEENY_OK);
    expect_folded("Where, broadcast", model, 0, 2, D2x3, (const float[]){1, 2, 3, -1, -1, -1});
    expect_folded("Where, inf and NaN", model, 1, 1, D3, (const float[]){INFINITY, NAN, 2});
    teeny_onnx_destroy(model);
    /* run-time X or Y: a condition that picks one operand everywhere passes it through */
    for (int pick_x = 0; pick_x < 2; pick_x++) {
        static const float other[1] = {NAN};
        m = oc_new(17);
        oc_input(m, "in", OC_FLOAT, 2, D2x3);
        oc_init_bool(m, "c", 0, NULL, pick_x ? &yes : &no);
        oc_init_f32(m, "k", 1, D1, other);
        oc_node(m, "Where", pick_x ? "c,in,k" : "c,k,in", "w");
        oc_output(m, "w");
        ck_assert_int_eq(fold_load(m, &model), TEENY_OK);
        teeny_node in_node, out_node;
        int ndim;
        int64_t shape[TEENY_ONNX_MAX_DIMS];
        ck_assert_int_eq(teeny_onnx_input(model, 0, NULL, &in_node, NULL), TEENY_OK);
        ck_assert_int_eq(teeny_onnx_output(model, 0, NULL, &out_node, &ndim, shape), TEENY_OK);
        ck_assert_msg(out_node == in_node && ndim == 2 && shape[0] == 2 && shape[1] == 3,
                      "Where picking %s: output node %d (input %d), rank %d", pick_x ? "X" : "Y", (int)out_node,
                      (int)in_node, ndim);
        teeny_onnx_destroy(model);
    }
    /* a mixed condition, or one whose picked operand is not the result's shape */
    m = oc_new(17);
    oc_input(m, "in", OC_FLOAT, 1, D3);
    oc_init_bool(m, "c", 1, D3, cond3);
    oc_init_f32(m, "k", 1, D3, fy);
    oc_node(m, "Where", "c,in,k", "w");
    oc_output(m, "w");
    expect_refused("Where, mixed condition", m, TEENY_ERR_UNSUPPORTED, "node \"w\" (Where)", "run-time select");
    m = oc_new(17);
    oc_input(m, "in", OC_FLOAT, 1, D1);
    oc_init_bool(m, "c", 0, NULL, &yes);
    oc_init_f32(m, "k", 1, D3, fy);
    oc_node(m, "Where", "c,in,k", "w");
    oc_output(m, "w");
    expect_refused("Where, X broadcast", m, TEENY_ERR_UNSUPPORTED, "node \"w\" (Where)", "run-time select");
    /* a run-time condition */
    m = oc_new(17);
    oc_input(m, "in", OC_FLOAT, 1, D3);
    oc_init_f32(m, "k", 1, D3, fy);
    oc_node(m, "Relu", "in", "r");
    oc_node(m, "Where", "r,k,k", "w");
    oc_output(m, "w");
    expect_refused("Where, run-time condition", m, TEENY_ERR_UNSUPPORTED, "node \"w\" (Where)", "computed at run time");
}
END_TEST

START_TEST(test_onnx_fold_range)
{
    static const int64_t i1 = 1, i10 = 10, i3 = 3, im3 = -3, i5 = 5, i0 = 0, i4 = 4, lo = INT64_MIN, hi = INT64_MAX;
    static const float f05 = 0.5f, f2 = 2.0f;
    teeny_onnx_model *model;
    oc_model *m = oc_new(17);
    oc_init_i64(m, "1", 0, NULL, &i1);
    oc_init_i64(m, "10", 0, NULL, &i10);
    oc_init_i64(m, "3", 0, NULL, &i3);
    oc_init_i64(m, "-3", 0, NULL, &im3);
    oc_init_i64(m, "5", 0, NULL, &i5);
    oc_init_i64(m, "0", 0, NULL, &i0);
    oc_init_i64(m, "4", 0, NULL, &i4);
    oc_init_i64(m, "max", 0, NULL, &hi);
    oc_init_f32(m, "f0.5", 0, NULL, &f05);
    oc_init_f32(m, "f2", 0, NULL, &f2);
    oc_node(m, "Range", "1,10,3", "up");
    oc_node(m, "Range", "10,1,-3", "down");
    oc_node(m, "Range", "5,5,1", "empty");
    oc_node(m, "Range", "0,10,4", "partial");
    oc_node(m, "Range", "5,1,1", "backwards"); /* limit below start with a positive delta: empty */
    oc_node(m, "Range", "f0.5,f2,f0.5", "floats");
    oc_node(m, "Range", "max,max,-3", "at_max");
    oc_output(m, "up");
    oc_output(m, "down");
    oc_output(m, "empty");
    oc_output(m, "partial");
    oc_output(m, "backwards");
    oc_output(m, "floats");
    oc_output(m, "at_max");
    ck_assert_int_eq(fold_load(m, &model), TEENY_OK);
    expect_folded("Range(1, 10, 3)", model, 0, 1, D3, (const float[]){1, 4, 7});
    expect_folded("Range(10, 1, -3)", model, 1, 1, D3, (const float[]){10, 7, 4});
    expect_folded("Range(5, 5, 1)", model, 2, 1, D0, NULL);
    expect_folded("Range(0, 10, 4)", model, 3, 1, D3, (const float[]){0, 4, 8});
    expect_folded("Range(5, 1, 1)", model, 4, 1, D0, NULL);
    expect_folded("Range(0.5, 2, 0.5)", model, 5, 1, D3, (const float[]){0.5f, 1.0f, 1.5f});
    expect_folded("Range(max, max, -3)", model, 6, 1, D0, NULL);
    teeny_onnx_destroy(model);
    /* delta 0; INT64_MIN to INT64_MAX (limit - start overflows int64): too many values */
    m = oc_new(17);
    oc_init_i64(m, "1", 0, NULL, &i1);
    oc_init_i64(m, "0", 0, NULL, &i0);
    oc_node(m, "Range", "1,1,0", "y");
    oc_output(m, "y");
    expect_refused("Range, delta 0", m, TEENY_ERR_FORMAT, "node \"y\" (Range)", "delta 0");
    m = oc_new(17);
    oc_init_i64(m, "lo", 0, NULL, &lo);
    oc_init_i64(m, "hi", 0, NULL, &hi);
    oc_init_i64(m, "1", 0, NULL, &i1);
    oc_node(m, "Range", "lo,hi,1", "y");
    oc_output(m, "y");
    expect_refused("Range, 2^64 values", m, TEENY_ERR_RANGE, "node \"y\" (Range)", "18446744073709551615 values");
    m = oc_new(17);
    oc_init_i64(m, "1", 0, NULL, &i1);
    oc_init_f32(m, "f2", 0, NULL, &f2);
    oc_node(m, "Range", "1,f2,1", "y");
    oc_output(m, "y");
    expect_refused("Range, mixed types", m, TEENY_ERR_FORMAT, "node \"y\" (Range)", "limit must be a scalar");
}
END_TEST

START_TEST(test_onnx_fold_size)
{
    static const int64_t x_dims[3] = {2, 3, 4};
    teeny_onnx_model *model;
    oc_model *m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 3, x_dims);
    oc_init_i64(m, "k", 2, D2x3, (const int64_t[]){1, 2, 3, 4, 5, 6});
    oc_node(m, "Size", "x", "n");
    oc_node(m, "Size", "k", "nk");
    oc_output(m, "n");
    oc_output(m, "nk");
    ck_assert_int_eq(fold_load(m, &model), TEENY_OK);
    expect_folded("Size of an input", model, 0, 0, NULL, (const float[]){24});
    expect_folded("Size of a constant", model, 1, 0, NULL, (const float[]){6});
    teeny_onnx_destroy(model);
    /* a bool padding mask given at import (an int32 feed), as nn.TransformerEncoder's export with a symbolic
     * batch reads it: Shape of it, and Where(mask, -inf, 0) */
    static const int32_t mask[6] = {0, 0, 1, 0, 1, 1};
    static const float minus_inf = -INFINITY, zero = 0;
    static const int32_t ids[6] = {7, 8, 9, 10, 11, 12};
    static const uint8_t pick_first_row[2] = {1, 0};
    teeny_onnx_feed feeds[2] = {{"mask", TEENY_ONNX_INT32, 2, D2x3, mask}, {"ids", TEENY_ONNX_INT32, 2, D2x3, ids}};
    teeny_onnx_params p = TEENY_ONNX_PARAMS_INIT;
    p.n_feeds = 2;
    p.feeds = feeds;
    m = oc_new(17);
    oc_input(m, "mask", OC_BOOL, 2, (const int64_t[]){-1, 3});
    oc_init_f32(m, "-inf", 0, NULL, &minus_inf);
    oc_init_f32(m, "0", 0, NULL, &zero);
    oc_node(m, "Shape", "mask", "s");
    oc_node(m, "Where", "mask,-inf,0", "bias");
    oc_input(m, "ids", OC_INT64, 2, (const int64_t[]){-1, 3});
    oc_init_bool(m, "rows", 2, D2x1, pick_first_row);
    oc_init_i64(m, "k3", 1, D3, (const int64_t[]){1, 2, 3});
    oc_node(m, "Where", "rows,ids,k3", "picked"); /* an int input given at import as X: a constant too */
    oc_output(m, "s");
    oc_output(m, "bias");
    oc_output(m, "picked");
    size_t size;
    unsigned char *bytes = oc_pack(m, &size);
    oc_free(m);
    teeny_status st = teeny_onnx_load_memory(th_ctx(), bytes, size, &p, &model);
    free(bytes);
    ck_assert_msg(st == TEENY_OK, "a fed mask: %s (%s)", teeny_status_name(st), teeny_last_error(th_ctx()));
    expect_folded("Shape of a fed mask", model, 0, 1, D2, (const float[]){2, 3});
    expect_folded("Where of a fed mask", model, 1, 2, D2x3, (const float[]){0, 0, -INFINITY, 0, -INFINITY, -INFINITY});
    expect_folded("Where of a fed X", model, 2, 2, D2x3, (const float[]){7, 8, 9, 1, 2, 3});
    teeny_onnx_destroy(model);
}
END_TEST

/* x [2, 3] in; If(Equal(Shape(x)[0], want_batch)): then_branch Constant
 * [1, 2] or Relu(x) (runtime), else_branch Add(k, k) (k = [5, 6]) or
 * Identity(x). */
static oc_model *if_model(int64_t want_batch, int runtime)
{
    static const int64_t k[2] = {5, 6}, zero = 0;
    oc_model *m = oc_new(17), *then_g = oc_new(17), *else_g = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 2, D2x3);
    oc_init_i64(m, "k", 1, D2, k);
    oc_init_i64(m, "zero", 0, NULL, &zero);
    oc_init_i64(m, "want", 0, NULL, &want_batch);
    oc_node(m, "Shape", "x", "s");
    oc_node(m, "Gather", "s,zero", "batch");
    oc_node(m, "Equal", "batch,want", "same");
    if (runtime) {
        oc_node(then_g, "Relu", "x", "t");
        oc_node(else_g, "Identity", "x", "e");
    } else {
        oc_node(then_g, "Constant", "", "t");
        oc_attr_tensor_i64(then_g, "value", 1, D2, (const int64_t[]){1, 2});
        oc_node(else_g, "Add", "k,k", "e");
    }
    oc_output(then_g, "t");
    oc_output(else_g, "e");
    oc_node(m, "If", "same", "y");
    oc_attr_graph(m, "then_branch", then_g);
    oc_attr_graph(m, "else_branch", else_g);
    oc_output(m, "y");
    return m;
}

START_TEST(test_onnx_fold_if)
{
    teeny_onnx_model *model;
    ck_assert_int_eq(fold_load(if_model(2, 0), &model), TEENY_OK);
    expect_folded("If, then_branch", model, 0, 1, D2, (const float[]){1, 2});
    teeny_onnx_destroy(model);
    ck_assert_int_eq(fold_load(if_model(3, 0), &model), TEENY_OK);
    expect_folded("If, else_branch", model, 0, 1, D2, (const float[]){10, 12});
    teeny_onnx_destroy(model);
    /* branches of run-time values: then_branch's Relu is a graph node, else_branch's Identity the input's */
    int nodes[2];
    for (int taken = 0; taken < 2; taken++) {
        teeny_node in_node, out_node;
        int ndim;
        int64_t shape[TEENY_ONNX_MAX_DIMS];
        ck_assert_int_eq(fold_load(if_model(taken ? 2 : 3, 1), &model), TEENY_OK);
        ck_assert_int_eq(teeny_onnx_input(model, 0, NULL, &in_node, NULL), TEENY_OK);
        ck_assert_int_eq(teeny_onnx_output(model, 0, NULL, &out_node, &ndim, shape), TEENY_OK);
        ck_assert_msg(ndim == 2 && shape[0] == 2 && shape[1] == 3, "If, run-time: rank %d", ndim);
        ck_assert_msg(taken ? out_node >= 0 && out_node != in_node : out_node == in_node,
                      "If, run-time, %s taken: output node %d, input %d", taken ? "then" : "else", (int)out_node,
                      (int)in_node);
        nodes[taken] = teeny_graph_node_count(teeny_onnx_graph(model));
        teeny_onnx_destroy(model);
    }
    ck_assert_int_eq(nodes[1], nodes[0] + 1); /* the Relu, and nothing of the branch not taken */
    /* a Conv -> Relu pair whose convolution a branch also reads: not fused (the branch sees the pre-activation) */
    static const int64_t x_dims[4] = {1, 1, 3, 3}, w_dims[4] = {1, 1, 1, 1};
    static const float w = 2.0f;
    static const uint8_t yes = 1;
    oc_model *m = oc_new(17), *then_g = oc_new(17), *else_g = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 4, x_dims);
    oc_init_f32(m, "w", 4, w_dims, &w);
    oc_init_bool(m, "c", 0, NULL, &yes);
    oc_node(m, "Conv", "x,w", "conv");
    oc_node(m, "Relu", "conv", "relu");
    oc_node(then_g, "Identity", "conv", "t");
    oc_output(then_g, "t");
    oc_node(else_g, "Identity", "x", "e");
    oc_output(else_g, "e");
    oc_node(m, "If", "c", "y");
    oc_attr_graph(m, "then_branch", then_g);
    oc_attr_graph(m, "else_branch", else_g);
    oc_output(m, "relu");
    oc_output(m, "y");
    ck_assert_int_eq(fold_load(m, &model), TEENY_OK);
    teeny_node relu_node, y_node;
    ck_assert_int_eq(teeny_onnx_output(model, 0, NULL, &relu_node, NULL, NULL), TEENY_OK);
    ck_assert_int_eq(teeny_onnx_output(model, 1, NULL, &y_node, NULL, NULL), TEENY_OK);
    ck_assert_msg(relu_node >= 0 && y_node >= 0 && relu_node != y_node,
                  "If reading a Conv's output: the Relu (%d) and the branch's value (%d) are one node", (int)relu_node,
                  (int)y_node);
    teeny_onnx_destroy(model);
}
END_TEST

START_TEST(test_onnx_fold_if_errors)
{
    static const uint8_t yes = 1;
    /* a failing node in the branch taken: named with the If; in the branch not taken, never read */
    for (int bad_taken = 0; bad_taken < 2; bad_taken++) {
        oc_model *m = oc_new(17), *then_g = oc_new(17), *else_g = oc_new(17);
        oc_input(m, "x", OC_FLOAT, 2, D2x3);
        oc_init_bool(m, "c", 0, NULL, &yes);
        oc_node(bad_taken ? then_g : else_g, "Softplus", "x", "bad");
        oc_output(bad_taken ? then_g : else_g, "bad");
        oc_node(bad_taken ? else_g : then_g, "Relu", "x", "good");
        oc_output(bad_taken ? else_g : then_g, "good");
        oc_node(m, "If", "c", "y");
        oc_attr_graph(m, "then_branch", then_g);
        oc_attr_graph(m, "else_branch", else_g);
        oc_output(m, "y");
        if (bad_taken) {
            expect_refused("If, failing branch", m, TEENY_ERR_UNSUPPORTED, "node \"y\" (If): then_branch: node \"bad\"",
                           "op Softplus is not supported");
        } else {
            teeny_onnx_model *model;
            ck_assert_int_eq(fold_load(m, &model), TEENY_OK);
            teeny_onnx_destroy(model);
        }
    }
    /* a run-time condition: computed (Greater of a Relu) or a graph input without a value */
    oc_model *m = oc_new(17), *then_g = oc_new(17), *else_g = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 1, D1);
    oc_node(m, "Relu", "x", "r");
    oc_node(then_g, "Identity", "x", "t");
    oc_output(then_g, "t");
    oc_node(else_g, "Identity", "x", "e");
    oc_output(else_g, "e");
    oc_node(m, "If", "r", "y");
    oc_attr_graph(m, "then_branch", then_g);
    oc_attr_graph(m, "else_branch", else_g);
    oc_output(m, "y");
    expect_refused("If, run-time condition", m, TEENY_ERR_UNSUPPORTED, "node \"y\" (If)", "computed at run time");
    m = oc_new(17), then_g = oc_new(17), else_g = oc_new(17);
    oc_input(m, "c", OC_BOOL, 0, NULL);
    oc_init_i64(m, "k", 1, D1, D2);
    oc_node(then_g, "Identity", "k", "t");
    oc_output(then_g, "t");
    oc_node(else_g, "Identity", "k", "e");
    oc_output(else_g, "e");
    oc_node(m, "If", "c", "y");
    oc_attr_graph(m, "then_branch", then_g);
    oc_attr_graph(m, "else_branch", else_g);
    oc_output(m, "y");
    expect_refused("If, condition a graph input", m, TEENY_ERR_UNSUPPORTED, "node \"y\" (If)", "graph input \"c\"");
    /* a branch whose outputs do not match the If's */
    m = oc_new(17), then_g = oc_new(17), else_g = oc_new(17);
    oc_init_bool(m, "c", 0, NULL, &yes);
    oc_init_i64(m, "k", 1, D1, D2);
    oc_node(then_g, "Identity", "k", "t");
    oc_node(else_g, "Identity", "k", "e");
    oc_output(else_g, "e");
    oc_node(m, "If", "c", "y");
    oc_attr_graph(m, "then_branch", then_g);
    oc_attr_graph(m, "else_branch", else_g);
    oc_output(m, "y");
    expect_refused("If, branch without outputs", m, TEENY_ERR_FORMAT, "node \"y\" (If)", "then_branch has 0 outputs");
}
END_TEST

/* Each folded op with a run-time operand: refused, naming the node and the op. */
START_TEST(test_onnx_fold_runtime_refused)
{
    static const char *const ops[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                      "And", "Or", "Xor", "Mod", "Not"};
    static const float k[3] = {1, 2, 3};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        oc_model *m = oc_new(17);
        char what[64];
        oc_input(m, "x", OC_FLOAT, 1, D3);
        oc_init_f32(m, "k", 1, D3, k);
        oc_node(m, "Relu", "x", "r");
        oc_node(m, ops[i], strcmp(ops[i], "Not") ? "k,r" : "r", "y");
        if (!strcmp(ops[i], "Mod"))
            oc_attr_int(m, "fmod", 1);
        oc_output(m, "y");
        snprintf(what, sizeof what, "node \"y\" (%s)", ops[i]);
        expect_refused(ops[i], m, TEENY_ERR_UNSUPPORTED, what, "is computed at run time");
    }
    /* a graph input given no value at import, float or int64 */
    for (int is_int = 0; is_int < 2; is_int++) {
        oc_model *m = oc_new(17);
        oc_input(m, "x", is_int ? OC_INT64 : OC_FLOAT, 1, D3);
        if (is_int)
            oc_init_i64(m, "k", 1, D3, (const int64_t[]){1, 2, 3});
        else
            oc_init_f32(m, "k", 1, D3, k);
        oc_node(m, "Equal", "x,k", "y");
        oc_output(m, "y");
        expect_refused("Equal of a graph input", m, TEENY_ERR_UNSUPPORTED, "node \"y\" (Equal): input 0 (A) is graph "
                       "input \"x\", given no value at import", "give the input a feed");
    }
    oc_model *m = oc_new(17);
    oc_input(m, "x", OC_FLOAT, 1, D1);
    oc_init_f32(m, "k", 0, NULL, k);
    oc_node(m, "Relu", "x", "r");
    oc_node(m, "Range", "k,r,k", "y");
    oc_output(m, "y");
    expect_refused("Range", m, TEENY_ERR_UNSUPPORTED, "node \"y\" (Range)", "run-time Range is not supported yet");
}
END_TEST

Suite *suite_onnx_ops(void)
{
    Suite *s = suite_create("onnx_ops");
    TCase *tc = tcase_create("registry");
    tcase_add_test(tc, test_onnx_ops_registry);
    tcase_add_test(tc, test_onnx_ops_readme);
    suite_add_tcase(s, tc);
    tc = tcase_create("fold");
    tcase_add_test(tc, test_onnx_fold_compare);
    tcase_add_test(tc, test_onnx_fold_logic);
    tcase_add_test(tc, test_onnx_fold_mod);
    tcase_add_test(tc, test_onnx_fold_where);
    tcase_add_test(tc, test_onnx_fold_range);
    tcase_add_test(tc, test_onnx_fold_size);
    tcase_add_test(tc, test_onnx_fold_if);
    tcase_add_test(tc, test_onnx_fold_if_errors);
    tcase_add_test(tc, test_onnx_fold_runtime_refused);
    suite_add_tcase(s, tc);
    return s;
}
