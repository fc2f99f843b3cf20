/*
 * test_onnx_ops.c -- the ONNX importer's op registry (src/onnx/ops.def)
 * through its public view (teeny_onnx_op_count, teeny_onnx_op_info): the
 * entries are ops.def's lines in order, no op type twice, every opset
 * range inside the model-wide 6..24, a bad index refused; and README.md's
 * table of ONNX ops ("Importing ONNX models") names every op type the
 * registry holds and none it lacks. No device needed.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
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

Suite *suite_onnx_ops(void)
{
    Suite *s = suite_create("onnx_ops");
    TCase *tc = tcase_create("registry");
    tcase_add_test(tc, test_onnx_ops_registry);
    tcase_add_test(tc, test_onnx_ops_readme);
    suite_add_tcase(s, tc);
    return s;
}
