/* fuzz_checkpoint.c -- libFuzzer target for the checkpoint loader (see fuzz_target.h). */
#define FUZZ_FORMAT FUZZ_CHECKPOINT
#include "fuzz_target.h"
