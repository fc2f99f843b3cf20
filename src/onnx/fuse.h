/*
 * fuse.h -- the chains attn_fuse.c's scan defers and fuse_apply.c imports
 * at their final node: the slots of a chain's nodes (im->chain, CH_N per
 * node) and its kinds.
 */
#ifndef TEENY_ONNX_FUSE_H
#define TEENY_ONNX_FUSE_H

/* Node indices of a chain (-1: that optional node is absent); CH_KIND
 * holds its kind, an attention chain or a GELU's (whose nodes take the
 * slots GE_*, the final Mul CH_FINAL). */
enum { CH_TRANSPOSE, CH_MUL_Q, CH_MUL_K, CH_SCORES, CH_SCALE, CH_ADD, CH_SOFTMAX, CH_FINAL, CH_KIND, CH_N };
enum { GE_SCALE, GE_ERF, GE_ADD, GE_MUL };
enum { CHAIN_ATTENTION, CHAIN_GELU };
#define SQRT2 1.41421356237309504880

#endif
