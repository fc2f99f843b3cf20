/* fuzz_idx.c -- libFuzzer target for the idx loader (see fuzz_target.h). */
#define FUZZ_FORMAT FUZZ_IDX
#include "fuzz_target.h"
