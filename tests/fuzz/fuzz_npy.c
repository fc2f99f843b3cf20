/* fuzz_npy.c -- libFuzzer target for the npy loader (see fuzz_target.h). */
#define FUZZ_FORMAT FUZZ_NPY
#include "fuzz_target.h"
