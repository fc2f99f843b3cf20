/*
 * onnx_craft.h -- ONNX models written in a few lines of C, for the tests
 * and the fuzz seeds: graph inputs, initializers, nodes with attributes and
 * graph outputs, packed with protobuf-c into a model file's bytes. Crafted
 * models say exactly what a test feeds the importer (ranks past the limit,
 * extreme attributes, long chains), with no Python in the test run.
 *
 *     oc_model *m = oc_new(17);
 *     oc_input(m, "x", OC_FLOAT, 2, (int64_t[]){1, 4});
 *     oc_node(m, "Relu", "x", "y");
 *     oc_output(m, "y");
 *     size_t n;
 *     unsigned char *bytes = oc_pack(m, &n);   (free() it)
 *     oc_free(m);
 *
 * Names are copied. Out of memory aborts (test code only; no check needed,
 * so the fuzz corpus writer links it too).
 */
#ifndef TEENY_TESTS_ONNX_CRAFT_H
#define TEENY_TESTS_ONNX_CRAFT_H

#include <stddef.h>
#include <stdint.h>

/* TensorProto.DataType values */
enum { OC_FLOAT = 1, OC_INT32 = 6, OC_INT64 = 7, OC_BOOL = 9, OC_FLOAT16 = 10 };

typedef struct oc_model oc_model;

oc_model *oc_new(int64_t opset);
void oc_free(oc_model *m);
/* A graph input; a dimension < 0 is symbolic ("N"). */
void oc_input(oc_model *m, const char *name, int elem_type, int ndim, const int64_t *dims);
/* A graph output, its type left to the importer. */
void oc_output(oc_model *m, const char *name);
/* Initializers: numel = the product of dims, data copied. */
void oc_init_f32(oc_model *m, const char *name, int ndim, const int64_t *dims, const float *data);
void oc_init_i64(oc_model *m, const char *name, int ndim, const int64_t *dims, const int64_t *data);
void oc_init_bool(oc_model *m, const char *name, int ndim, const int64_t *dims, const uint8_t *data);
/* float16 from half bit patterns: in raw_data (little-endian), or with
 * in_int32_data set one a value in int32_data, as onnx.helper writes them;
 * at most 64 values. */
void oc_init_f16(oc_model *m, const char *name, int ndim, const int64_t *dims, const uint16_t *bits,
                 int in_int32_data);
/* A node; inputs and outputs are comma-separated names ("" names an
 * omitted optional input: "x,,scales"). The node is named after its first
 * output. Attributes go to the node added last. */
void oc_node(oc_model *m, const char *op, const char *inputs, const char *outputs);
void oc_attr_int(oc_model *m, const char *name, int64_t v);
void oc_attr_float(oc_model *m, const char *name, float v);
void oc_attr_ints(oc_model *m, const char *name, int n, const int64_t *v);
void oc_attr_string(oc_model *m, const char *name, const char *v);
/* An int64 tensor attribute (Constant's value). */
void oc_attr_tensor_i64(oc_model *m, const char *name, int ndim, const int64_t *dims, const int64_t *data);
/* A graph attribute (If's then_branch, else_branch): sub's inputs,
 * initializers, nodes and outputs as they are now; m takes ownership of
 * sub (add nothing to it afterwards). */
void oc_attr_graph(oc_model *m, const char *name, oc_model *sub);
/* The model file's bytes (caller frees); *size their count. */
unsigned char *oc_pack(const oc_model *m, size_t *size);

#endif
