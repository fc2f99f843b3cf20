/*
 * io.h -- the file layer's private interface (src/io/file.c): regular-file
 * opens and reads and crash-safe writes. Below everything but core (the
 * kernel cache uses it); the formats (safetensors, npy, IDX, checkpoints)
 * are public API and need no header here.
 */
#ifndef TEENY_IO_H
#define TEENY_IO_H

#include "../core/core.h"

/* ---- files (file.c) ----
 * Write n_parts buffers to path crash-safely: a temp file in path's
 * directory named after the writer's host and pid, fsynced, renamed over
 * path, the directory fsynced; temp files of the same target left by a dead
 * writer are removed first. Errors name fn and path and go to ctx (NULL:
 * the thread's error). */
teeny_status teeny__write_file_atomic(const teeny_ctx *ctx, const char *fn, const char *path,
                                      const void *const *parts, const size_t *lens, int n_parts);
/* The same, recording nothing: the reason goes to msg (the kernel cache). */
teeny_status teeny__write_file_atomic_msg(const char *path, const void *const *parts, const size_t *lens,
                                          int n_parts, char *msg, size_t cap);
/* Open path read-only if it is a regular file, without blocking on a FIFO;
 * the descriptor, or -1 with the reason in *why (static text) and errno
 * set (EISDIR for a directory, EINVAL for another non-regular file). */
int teeny__open_regular(const char *path, const char **why);
/* Read the whole regular file at path (opened as above) into *buf, NUL-
 * terminated (caller frees with teeny__free), its size in *len. TEENY_OK,
 * or TEENY_ERR_IO (errno kept from a failed open: ENOENT for a missing
 * file), TEENY_ERR_RANGE or TEENY_ERR_NOMEM with the reason in msg;
 * records nothing. */
teeny_status teeny__read_file(const char *path, unsigned char **buf, size_t *len, char *msg, size_t cap);

#endif
