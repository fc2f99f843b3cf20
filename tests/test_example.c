/*
 * test_example.c -- the Fashion-MNIST example as a user runs it: a short
 * fixed budget on a subset must lower the training loss and reach a stated
 * accuracy floor, and --resume from the first epoch's checkpoint must give
 * a second-epoch checkpoint byte-identical to the uninterrupted run's.
 * Skipped (with a message) when the data set is not installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define DATA "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"
#define ACC_FLOOR 0.60

static const char *build_dir(void)
{
    const char *b = getenv("TEENY_BUILD_DIR");
    return b && *b ? b : "build";
}

/* Run the example; collect each epoch's train_loss and test_acc. */
static int run_example(const char *args, double *loss, double *acc, int max)
{
    char cmd[2048], line[1024];
    int n = 0;
    snprintf(cmd, sizeof cmd, "%s/train_fashion_mnist %s 2>/dev/null", build_dir(), args);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    while (fgets(line, sizeof line, p)) {
        int e, total;
        double l, a, s, ips;
        if (sscanf(line, "epoch %d/%d train_loss %lf test_acc %lf epoch_s %lf images_per_s %lf", &e, &total, &l, &a,
                   &s, &ips) == 6 && n < max) {
            loss[n] = l;
            acc[n] = a;
            n++;
        }
    }
    int rc = pclose(p);
    ck_assert_msg(rc == 0, "%s exited with %d", cmd, rc);
    return n;
}

static int files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

START_TEST(test_example_trains_and_resumes)
{
    if (access(DATA, R_OK) != 0) {
        th_skip("%s missing (install dataset-fashion-mnist)", DATA);
    }
    char out[256], args[1024], a[512], b[512];
    double loss[4], acc[4], loss2[4], acc2[4];
    const char *dev = getenv("TEENY_DEVICE");
    snprintf(out, sizeof out, "%s/example-test-%ld", build_dir(), (long)getpid());
    snprintf(args, sizeof args,
             "--epochs 2 --batch 64 --train-limit 3200 --test-limit 1000 --seed 5 --out %s/full%s%s", out,
             dev ? " --device " : "", dev ? dev : "");
    ck_assert_int_eq(run_example(args, loss, acc, 4), 2);
    ck_assert_msg(loss[1] < loss[0], "training loss did not fall: %g -> %g", loss[0], loss[1]);
    ck_assert_msg(acc[1] >= ACC_FLOOR, "test accuracy %g below the floor %g", acc[1], ACC_FLOOR);

    snprintf(args, sizeof args,
             "--batch 64 --train-limit 3200 --test-limit 1000 --seed 5 --resume %s/full/epoch_001.safetensors "
             "--out %s/resumed%s%s", out, out, dev ? " --device " : "", dev ? dev : "");
    ck_assert_int_eq(run_example(args, loss2, acc2, 4), 1); /* epoch 2 only */
    ck_assert_msg(loss2[0] == loss[1] && acc2[0] == acc[1], "resumed epoch 2 differs: loss %g vs %g", loss2[0], loss[1]);
    snprintf(a, sizeof a, "%s/full/epoch_002.safetensors", out);
    snprintf(b, sizeof b, "%s/resumed/epoch_002.safetensors", out);
    ck_assert_msg(files_equal(a, b), "%s and %s differ", a, b);
    snprintf(a, sizeof a, "%s/full/training.svg", out);
    ck_assert_msg(access(a, R_OK) == 0, "no %s", a);
    snprintf(args, sizeof args, "rm -rf %s", out);
    ck_assert(system(args) == 0);
}
END_TEST

Suite *suite_example(void)
{
    Suite *s = suite_create("example");
    TCase *tc = tcase_create("train");
    if (!th_small())
        tcase_add_test(tc, test_example_trains_and_resumes);
    suite_add_tcase(s, tc);
    return s;
}
