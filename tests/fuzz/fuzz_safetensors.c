/* fuzz_safetensors.c -- libFuzzer target for the safetensors loader (see fuzz_target.h). */
#define FUZZ_FORMAT FUZZ_SAFETENSORS
#include "fuzz_target.h"
