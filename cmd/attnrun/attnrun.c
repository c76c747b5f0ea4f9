/*
 * attnrun.c - the run command: the command line checked, attn_run, its
 * messages and exit code.  What the program does about its process
 * (descriptors, signals) is cmd/cli/process.c, the progress line
 * progress.c; everything else is libattn.
 */
#define _GNU_SOURCE
#include "attnrun/attnrun.h"

#include "attn_ranks.h"
#include "attnrun/plan_json.h"
#include "attnrun/progress.h"
#include "cli/cli.h"
#include "cli/process.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The command line, words joined by spaces, quoted where a shell would need it. */
static char *join_command_line(int argc, char **argv)
{
    size_t len = 1;
    for (int i = 0; i < argc; i++)
        len += 4 * strlen(argv[i]) + 3;
    char *line = attn_malloc(len), *p = line;
    if (line == NULL)
        return NULL;
    for (int i = 0; i < argc; i++) {
        bool plain = argv[i][0] != '\0' && strspn(argv[i], "abcdefghijklmnopqrstuvwxyz"
                                                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                           "0123456789-_./=,:+@%") == strlen(argv[i]);
        if (i > 0)
            *p++ = ' ';
        if (!plain)
            *p++ = '\'';
        for (const char *c = argv[i]; *c; c++) {
            if (*c == '\'' && !plain) {
                memcpy(p, "'\\''", 4);
                p += 4;
            } else {
                *p++ = *c;
            }
        }
        if (!plain)
            *p++ = '\'';
    }
    *p = '\0';
    return line;
}

/* Parses argv into c; returns EXIT_OK or EXIT_USAGE (message printed). */
static int parse_arguments(int argc, char **argv, attnrun_cli *c)
{
    int code = attnrun_parse_options(argc, argv, c);
    if (code != EXIT_OK)
        return code;
    if (c->help || c->version)
        return EXIT_OK;
    if (optind == argc)
        return cli_usage_error("no input file given");
    if (argc - optind > 1)
        return cli_usage_error("one input file expected, got %d ('%s', '%s' ...)", argc - optind,
                           argv[optind], argv[optind + 1]);
    c->run.input = argv[optind];
    if (c->run.in_place && c->run.output != NULL)
        return cli_usage_error("-o and --in-place exclude each other");
    if (c->run.kv_tokens != NULL && c->run.names[ATTN_IN_KV] == NULL)
        return cli_usage_error("--kv-tokens labels the keys of --kv; in self-attention the keys "
                           "take the queries' --tokens");
    if (c->run.append && (c->run.in_place || c->run.output == NULL))
        return cli_usage_error("--append adds to the results file -o OUT.h5%s",
                           c->run.in_place ? ", not to the input: not with --in-place" : "; give it");
    if (c->run.append && strcmp(c->run.group, "/") == 0)
        return cli_usage_error("--append needs --group PATH for the results (e.g. --group /layer3)");
    if (!c->run.in_place && c->run.output == NULL && !c->run.dry_run)
        return cli_usage_error("no output: give -o OUT.h5 or --in-place");
    if (c->json && !c->run.dry_run)
        return cli_usage_error("--json prints the plan of a dry run: use it with --dry-run");
    return EXIT_OK;
}

/* --expect before the run: the outputs it names saved, and (by a dry
 * run's shapes) each reference checked, so that a wrong one stops the run
 * before it writes.  A dry run that fails is left to the run to report. */
static int expect_before(attnrun_cli *c)
{
    for (size_t i = 0; i < c->expect.count; i++)
        c->run.save |= 1u << c->expect.pairs[i].which;
    if (c->expect.count == 0 || c->run.dry_run)
        return EXIT_OK;
    attn_run_options dry = c->run;
    dry.dry_run = true;
    dry.warn = NULL;
    dry.progress = NULL;
    dry.transaction = NULL;
    attn_run_report report;
    attn_error err;
    if (attn_run(&dry, &report, &err) != ATTN_OK)
        return EXIT_OK;
    return expect_check_shapes(&c->expect, &c->run, &report);
}

/* --expect after the run: the shapes of a dry run, or the outputs
 * compared and a difference diagnosed. */
static int expect_after(const attnrun_cli *c, const attn_run_report *report)
{
    if (c->expect.count == 0)
        return EXIT_OK;
    if (c->run.dry_run)
        return expect_check_shapes(&c->expect, &c->run, report);
    char failure[128] = "";
    int code = expect_compare(&c->expect, &c->run, report, c->quiet, failure);
    if (code == EXIT_EXPECT)
        expect_diagnose(&c->expect, &c->run, report, failure);
    return code;
}

/* The run itself: the command line parsed, attn_run, its report. */
static int run_main(int argc, char **argv)
{
    attnrun_cli c;
    memset(&c, 0, sizeof c);
    c.run = attn_run_defaults();
    char *command_line = join_command_line(argc, argv);   /* before getopt permutes argv */
    int code = parse_arguments(argc, argv, &c);
    if (code != EXIT_OK) {
        free(command_line);
        return code;
    }
    if (c.help || c.version) {
        free(command_line);
        if (c.help)
            attnrun_print_usage(stdout);
        else
            printf("attnrun %s\n", ATTN_VERSION);
        return cli_finish_stdout(EXIT_OK);
    }

    if (command_line == NULL) {
        fprintf(stderr, "attnrun: out of memory\n");
        return EXIT_RUNTIME;
    }
    if ((code = expect_before(&c)) != EXIT_OK) {
        free(command_line);
        return code;
    }
    attn_run_report report;
    progress_line progress;
    progress_start(&progress, !c.quiet && (c.progress || isatty(STDERR_FILENO)),
                   isatty(STDERR_FILENO), &c.run, &report);
    c.run.command_line = command_line;
    c.run.progress = progress_show;
    c.run.progress_context = &progress;
    attnrun_warnings warnings = {.count = 0};
    if (!c.quiet) {                    /* -q: no warnings, none looked for */
        c.run.warn = attnrun_warn;
        c.run.warn_context = &warnings;
    }
    bool target_is_input = c.run.in_place || c.run.output == NULL;
    c.run.transaction = process_watch(c.run.input, target_is_input ? c.run.input : c.run.output,
                                      target_is_input);

    attn_error err = {0};
    int status = attn_run(&c.run, &report, &err);
    process_run_ended();
    if (process_progress_line_is_open())
        fputc('\n', stderr);
    free(command_line);
    c.run.command_line = NULL;    /* the plans below read the options */
    if (status != ATTN_OK) {
        if (progress.failure != 0)
            fprintf(stderr, "attnrun: cannot report progress on standard error: %s\n",
                    strerror(progress.failure));
        else
            fprintf(stderr, "attnrun: %s%s\n", err.msg, cli_hint_of(&err));
        return cli_exit_code(status);
    }
    attnrun_print_warnings(stderr, &warnings);   /* they change no exit status */
    if (c.expect.count > 0 && !c.run.dry_run)
        c.run.transaction = process_check_started(target_is_input ? c.run.input : c.run.output);
    code = expect_after(&c, &report);
    process_run_ended();               /* the check's re-runs too */
    if (c.run.dry_run && c.json)
        plan_json_print(stdout, &c.run, &report);
    else if (c.run.dry_run)
        plan_text_print(stdout, &c.run, &report);
    return cli_finish_stdout(code);
}

int attnrun_main(int argc, char **argv)
{
    /* Under MPI (attnrun-mpi) every rank runs this; rank 0 alone speaks,
     * for all (the others agree with it on how the run went). */
    if (!attn_ranks_start(&argc, &argv)) {
        fprintf(stderr, "attnrun: cannot start MPI\n");
        return EXIT_RUNTIME;
    }
    if (attn_rank() != 0)
        process_silence();
    int code = run_main(argc, argv);
    if (attn_ranks_stranded()) {       /* the shared file cannot be closed */
        fflush(NULL);
        attn_ranks_abort(code);
    }
    attn_ranks_finish();
    return code;
}
