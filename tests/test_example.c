/*
 * test_example.c -- the Fashion-MNIST example as a user runs it: a short
 * fixed budget on a subset must lower the training loss and reach a stated
 * accuracy floor, and --resume from the first epoch's checkpoint must give
 * a second-epoch checkpoint byte-identical to the uninterrupted run's.
 * Skipped (with a message) when the data set is not installed. The
 * options tests need neither data nor training: every malformed number
 * is refused with its message and exit status 2, and --out is checked
 * before anything is read or trained.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* Run the example with args (stderr too); its output into out, its exit
 * status returned (-1 when it did not exit normally). */
static int run_capture(const char *args, char *out, size_t cap)
{
    char cmd[2048];
    size_t len = 0;
    snprintf(cmd, sizeof cmd, "%s/train_fashion_mnist %s 2>&1", build_dir(), args);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "cannot run %s", cmd);
    out[0] = '\0';
    while (len + 1 < cap && fgets(out + len, (int)(cap - len), p))
        len += strlen(out + len);
    while (fgetc(p) != EOF) {
    }
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Every malformed number is refused with exit status 2 and a message
 * naming the option, before a device or the data is touched (--data
 * names nothing, so getting past the parser would print another error). */
START_TEST(test_example_rejects_bad_numbers)
{
    static const struct {
        const char *args, *message;
    } cases[] = {
        {"--epochs 4294967297", "--epochs 4294967297: out of range (1 to 1000)"}, /* wrapped to 1 before */
        {"--epochs 0", "--epochs 0: out of range"},
        {"--epochs 1001", "--epochs 1001: out of range"},
        {"--epochs 5x", "--epochs \"5x\": not a whole number"},
        {"--epochs ' 5'", "--epochs \" 5\": not a whole number"},
        {"--epochs +5", "--epochs \"+5\": not a whole number"},
        {"--epochs ''", "--epochs \"\": not a whole number"},
        {"--seed -1", "--seed \"-1\": not a whole number"},                 /* 2^64 - 1 before */
        {"--seed 18446744073709551616", "--seed 18446744073709551616: out of range"},
        {"--seed 1.5", "--seed \"1.5\": not a whole number"},
        {"--train-limit 99999999999999999999", "--train-limit 99999999999999999999: out of range"}, /* accepted */
        {"--train-limit -5", "--train-limit \"-5\": not a whole number"},
        {"--test-limit 9223372036854775808", "--test-limit 9223372036854775808: out of range"},
        {"--batch 1", "--batch 1: out of range (2 to 65536)"},
        {"--batch 65537", "--batch 65537: out of range"},
        {"--batch 0x40", "--batch \"0x40\": not a whole number"},
        {"--shards 4", "--shards needs --dist"},
        {"--epochs", "--epochs needs a value: --epochs N (try train_fashion_mnist --help)"},
        {"-e 5", "unknown option \"-e\""},
        {"--epochs=5", "give the value of --epochs as the next argument: --epochs 5"},
        {"extra", "unexpected argument \"extra\""},
    };
    char out[8192], args[512];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(args, sizeof args, "--data /nonexistent --out /nonexistent/out %s", cases[i].args);
        int rc = run_capture(args, out, sizeof out);
        ck_assert_msg(rc == 2, "%s: exit status %d, expected 2; output: %s", cases[i].args, rc, out);
        ck_assert_msg(strstr(out, cases[i].message) != NULL, "%s: output lacks \"%s\": %s", cases[i].args,
                      cases[i].message, out);
    }
}
END_TEST

/* The largest values pass the parser (and the run then stops at the
 * missing data, exit status 1); --out naming a regular file, or a path
 * under one, stops the run before the data is even read. */
START_TEST(test_example_checks_out_first)
{
    char out[8192], args[1024], dir[256], file[300];
    snprintf(dir, sizeof dir, "%s/example-out-%ld", build_dir(), (long)getpid());
    snprintf(args, sizeof args, "--seed 18446744073709551615 --epochs 1000 --train-limit 9223372036854775807 "
             "--test-limit 9223372036854775807 --batch 65536 --data /nonexistent --out %s/run", dir);
    int rc = run_capture(args, out, sizeof out);
    ck_assert_msg(rc == 1 && strstr(out, "/nonexistent/train-images") != NULL,
                  "the largest values: exit status %d, expected 1 at the missing data: %s", rc, out);
    snprintf(file, sizeof file, "%s/afile", dir);
    ck_assert_msg(mkdir(dir, 0755) == 0 || errno == EEXIST, "cannot make %s", dir);
    FILE *f = fopen(file, "w");
    ck_assert_msg(f != NULL, "cannot make %s", file);
    fclose(f);
    const char *suffix[2] = {"", "/sub"};
    const char *message[2] = {"exists and is not a directory", "cannot create the directory"};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "--data /nonexistent --out %s%s", file, suffix[k]);
        rc = run_capture(args, out, sizeof out);
        ck_assert_msg(rc == 1, "--out %s%s: exit status %d, expected 1: %s", file, suffix[k], rc, out);
        ck_assert_msg(strstr(out, message[k]) != NULL && strstr(out, "/nonexistent") == NULL,
                      "--out %s%s: expected \"%s\" before the data is read: %s", file, suffix[k], message[k], out);
    }
    snprintf(args, sizeof args, "rm -rf %s", dir);
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
    tc = tcase_create("options");
    tcase_add_test(tc, test_example_rejects_bad_numbers);
    tcase_add_test(tc, test_example_checks_out_first);
    suite_add_tcase(s, tc);
    return s;
}
