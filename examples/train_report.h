/*
 * train_report.h -- what train_fashion_mnist shows and keeps besides the
 * training itself: the --out directory (made and proven writable before
 * anything is trained), the progress bar, the SVG chart of training loss
 * and test accuracy, and the history as checkpoint metadata text.
 * Header-only, as fashion_net.h, so the example stays one program.
 */
#ifndef TEENY_TRAIN_REPORT_H
#define TEENY_TRAIN_REPORT_H

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "options.h"

/* mkdir -p; -1 with errno set on failure. */
static inline int train_mkdir_p(const char *path)
{
    char tmp[1024];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

/* --out before anything is trained: make the directory (and its parents)
 * and prove a file can be made there, so that a regular file of that
 * name, a parent that is a file or a read-only directory fails now, not
 * at the first checkpoint after a whole epoch. 1 when usable. */
static inline int train_out_dir_usable(const char *dir)
{
    struct stat sb;
    if (train_mkdir_p(dir) || stat(dir, &sb)) {
        fprintf(stderr, "error: --out %s: cannot create the directory: %s\n", dir, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "error: --out %s: exists and is not a directory\n", dir);
        return 0;
    }
    return ex_dir_takes_files("--out", dir, dir, "train_fashion_mnist");
}

/* The training loss and test accuracy per epoch as an SVG line chart. */
static inline void train_write_svg(const char *path, int n, const double *loss, const double *acc, int total_epochs)
{
    FILE *f = fopen(path, "w");
    const double W = 720, H = 400, L = 70, R = 70, T = 40, B = 50;
    double lmax = 0, amin = 1, amax = 0;
    if (!f)
        return;
    for (int i = 0; i < n; i++) {
        lmax = loss[i] > lmax ? loss[i] : lmax;
        amin = acc[i] < amin ? acc[i] : amin;
        amax = acc[i] > amax ? acc[i] : amax;
    }
    lmax = lmax > 0 ? lmax * 1.1 : 1;
    amin = floor(amin * 20) / 20;
    amax = amin + 0.05 > amax ? amin + 0.05 : ceil(amax * 20) / 20;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">teenycl Fashion-MNIST training</text>\n",
            W / 2);
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#888\"/>\n", L, T,
            W - L - R, H - T - B);
    for (int k = 0; k <= 4; k++) {
        double y = T + (H - T - B) * k / 4.0;
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", L, W - R, y, y);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#c0392b\">%.3f</text>\n", L - 6, y + 4,
                lmax * (1 - k / 4.0));
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" fill=\"#2471a3\">%.3f</text>\n", W - R + 6, y + 4,
                amax - (amax - amin) * k / 4.0);
    }
    int span = total_epochs > 1 ? total_epochs - 1 : 1;
    for (int e = 0; e < total_epochs; e += total_epochs > 15 ? total_epochs / 10 : 1)
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d</text>\n",
                L + (W - L - R) * e / span, H - B + 18, e + 1);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">epoch</text>\n", (L + W - R) / 2, H - 12);
    for (int s = 0; s < 2; s++) {
        const double *v = s ? acc : loss;
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", s ? "#2471a3" : "#c0392b");
        for (int i = 0; i < n; i++) {
            double x = L + (W - L - R) * i / span;
            double y = s ? T + (H - T - B) * (amax - v[i]) / (amax - amin) : T + (H - T - B) * (1 - v[i] / lmax);
            fprintf(f, "%.1f,%.1f ", x, y);
        }
        fprintf(f, "\"/>\n");
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#c0392b\">train loss</text>\n", L + 10, T + 16);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\" fill=\"#2471a3\">test accuracy</text>\n", W - R - 10,
            T + 16);
    fprintf(f, "</svg>\n");
    fclose(f);
}

/* The progress bar, redrawn in place on stderr (a terminal's only). */
static inline void train_progress(int epoch, int epochs, int64_t done, int64_t total, double loss, double ips,
                                  double elapsed)
{
    int width = 28, filled = (int)(width * done / (total ? total : 1));
    double eta = done ? elapsed * (double)(total - done) / (double)done : 0;
    fprintf(stderr, "\repoch %d/%d [", epoch, epochs);
    for (int i = 0; i < width; i++)
        fputc(i < filled ? '#' : '.', stderr);
    fprintf(stderr, "] %" PRId64 "/%" PRId64 " loss %.4f %6.0f img/s %4.0fs ETA %4.0fs ", done, total, loss, ips,
            elapsed, eta);
    fflush(stderr);
}

/* History and generator state travel in checkpoint metadata as text. */
static inline void train_history_text(char *buf, size_t cap, int n, const double *loss, const double *acc)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len + 40 < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%.17g:%.17g", i ? "," : "", loss[i], acc[i]);
}

static inline int train_history_parse(const char *s, double *loss, double *acc, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        loss[n] = strtod(s, &end);
        if (*end != ':')
            return -1;
        acc[n] = strtod(end + 1, &end);
        n++;
        if (*end == ',')
            end++;
        s = end;
    }
    return n;
}

#endif
