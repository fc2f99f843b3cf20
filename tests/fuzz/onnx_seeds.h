/*
 * onnx_seeds.h -- fuzz_onnx's crafted seeds (onnx_seeds.c): one model per
 * op the importer takes, with its attributes.
 */
#ifndef TEENY_FUZZ_ONNX_SEEDS_H
#define TEENY_FUZZ_ONNX_SEEDS_H

/* Writes the seed models into the existing directory dir as <name>.onnx;
 * returns how many, or -1 (said on stderr) when a file cannot be written. */
int onnx_make_seeds(const char *dir);

#endif
