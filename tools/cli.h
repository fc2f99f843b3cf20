/*
 * cli.h -- the command-line conventions every teenycl program keeps (the
 * tools in tools/ and the examples in examples/):
 *
 *   --help       the usage and every option, on stdout, exit status 0
 *   --version    "PROGRAM (teenycl) X.Y.Z" from teeny_version(), exit 0
 *   errors       an unknown option ("-i"), an option whose value is
 *                missing ("--device" last, or followed by another option),
 *                "--name=value" (values are the next argument), a
 *                positional argument too many: one line on stderr naming
 *                it, then "(try PROGRAM --help)"; exit status 2
 *
 * A program describes its options in a table (the order of an enum of its
 * own) and reads argv with cli_next, which hands back each option's index
 * and value. Header-only (static inline functions): check-install compiles
 * tools/teeny-info.c alone against the installed header.
 */
#ifndef TEENY_TOOLS_CLI_H
#define TEENY_TOOLS_CLI_H

#include <stdio.h>
#include <string.h>

#include "teenycl.h"

typedef struct {
    const char *name;  /* "--device" */
    const char *value; /* what it takes, "SPEC"; NULL for a flag */
    const char *help;  /* what it does; '\n' starts a continuation line */
} cli_opt;

typedef struct {
    const char *prog;     /* "teeny-run" */
    const char *synopsis; /* after "usage: PROG "; '\n' starts another usage line, '\n' and a space
                             continues this one */
    const char *about;    /* a paragraph before the options, or NULL */
    const cli_opt *opts;  /* ended by an entry whose name is NULL */
    const char *footer;   /* a paragraph after the options (exit statuses, environment), or NULL */
} cli_spec;

/* What cli_next returns besides an option's index in opts. */
enum { CLI_ARG = -2, CLI_EXIT_OK = -3, CLI_EXIT_USAGE = -4 };

/* One line on stderr naming what is wrong, and where to look: returns 2
 * (the usage status). */
static inline int cli_fail(const cli_spec *s, const char *what)
{
    fprintf(stderr, "%s: %s (try %s --help)\n", s->prog, what, s->prog);
    return 2;
}

static inline void cli_help(const cli_spec *s, FILE *f)
{
    const char *p = s->synopsis;
    fprintf(f, "usage: %s ", s->prog);
    for (; *p; p++) {
        fputc(*p, f);
        if (*p != '\n')
            continue;
        if (p[1] != ' ') {
            fprintf(f, "       %s ", s->prog);
            continue;
        }
        fprintf(f, "%*s", 8 + (int)strlen(s->prog), ""); /* a continuation: under the options */
        while (p[1] == ' ')
            p++;
    }
    fprintf(f, "\n");
    if (s->about)
        fprintf(f, "\n%s\n", s->about);
    fprintf(f, "\noptions:\n");
    for (const cli_opt *o = s->opts; o->name; o++) {
        char head[64];
        snprintf(head, sizeof head, "%s%s%s", o->name, o->value ? " " : "", o->value ? o->value : "");
        fprintf(f, "  %-22s", head);
        if (strlen(head) > 20)
            fprintf(f, "\n  %-22s", "");
        for (p = o->help; *p; p++) {
            fputc(*p, f);
            if (*p == '\n')
                fprintf(f, "  %-22s", "");
        }
        fprintf(f, "\n");
    }
    fprintf(f, "  %-22s%s\n  %-22s%s\n", "--help", "this text, on standard output", "--version",
            "the program's name and the teenycl library's version");
    if (s->footer)
        fprintf(f, "\n%s\n", s->footer);
}

/* argv[*i] (i from 1 while it stays below argc): an option's index in
 * s->opts, with *value set to its value (*i moves past it) when it takes
 * one; CLI_ARG for an argument that is not an option (in *value);
 * CLI_EXIT_OK once --help or --version has been printed; CLI_EXIT_USAGE
 * once an error has been printed. */
static inline int cli_next(const cli_spec *s, int argc, char **argv, int *i, const char **value)
{
    const char *a = argv[*i];
    *value = NULL;
    if (a[0] != '-' || !a[1]) {
        *value = a;
        return CLI_ARG;
    }
    if (!strcmp(a, "--help")) {
        cli_help(s, stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(a, "--version")) {
        unsigned v = teeny_version();
        printf("%s (teenycl) %u.%u.%u\n", s->prog, v / 10000, v / 100 % 100, v % 100);
        return CLI_EXIT_OK;
    }
    char what[512];
    for (int k = 0; s->opts[k].name; k++) {
        const cli_opt *o = &s->opts[k];
        size_t len = strlen(o->name);
        if (!strncmp(a, o->name, len) && a[len] == '=') {
            if (o->value)
                snprintf(what, sizeof what, "\"%.200s\": give the value of %s as the next argument: %s %.200s", a,
                         o->name, o->name, a + len + 1);
            else
                snprintf(what, sizeof what, "\"%.200s\": %s takes no value", a, o->name);
            cli_fail(s, what);
            return CLI_EXIT_USAGE;
        }
        if (strcmp(a, o->name))
            continue;
        if (!o->value)
            return k;
        /* a value that looks like an option ("--device --batch 2") is a missing one */
        if (*i + 1 >= argc || (argv[*i + 1][0] == '-' && argv[*i + 1][1] == '-' && argv[*i + 1][2])) {
            snprintf(what, sizeof what, "%s needs a value: %s %s", o->name, o->name, o->value);
            cli_fail(s, what);
            return CLI_EXIT_USAGE;
        }
        *value = argv[++*i];
        return k;
    }
    snprintf(what, sizeof what, "unknown option \"%.200s\"", a);
    cli_fail(s, what);
    return CLI_EXIT_USAGE;
}

#endif
