/* cli.c - the ends of attnrun's command lines (cli.h). */
#include "cli/cli.h"

#include "attn_atomic.h"
#include "attn_results.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>

int cli_exit_code(int status)
{
    switch (status) {
    case ATTN_OK:     return EXIT_OK;
    case ATTN_EUSAGE: return EXIT_USAGE;
    case ATTN_EINPUT: return EXIT_INPUT;
    default:          return EXIT_RUNTIME;
    }
}

int cli_finish_stdout(int code)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) {
        if (code == EXIT_OK) {
            fprintf(stderr, "attnrun: cannot write to standard output: %s\n",
                    errno != 0 ? strerror(errno) : "a write failed");
            return EXIT_RUNTIME;
        }
    }
    return code;
}

/* Groups named in a message, at most. */
#define GROUPS_SHOWN 3

size_t cli_other_groups(const char *path, const char *group, bool *index, char *names,
                        size_t len)
{
    attn_result_groups groups;
    attn_error err;
    size_t count = 0, used = 0;
    *index = false;
    if (len > 0)
        names[0] = '\0';
    if (attn_results_groups(path, &groups, &err) != ATTN_OK)
        return 0;
    const size_t group_len = strlen(group) - (strlen(group) > 1 && group[strlen(group) - 1] == '/');
    for (size_t i = 0; i < groups.count; i++)
        if (strlen(groups.paths[i]) == group_len && strncmp(groups.paths[i], group, group_len) == 0)
            goto out;                                /* the group asked for holds results */
    for (size_t i = 0; i < groups.count && i < GROUPS_SHOWN && used < len; i++)
        used += (size_t)snprintf(names + used, len - used, "%s%s", i > 0 ? ", " : "",
                                 groups.paths[i]);
    if (groups.count > GROUPS_SHOWN && used < len)
        snprintf(names + used, len - used, ", ...");
    count = groups.count;
    *index = groups.index;
out:
    attn_result_groups_free(&groups);
    return count;
}

/* The first bytes of the file at path, at most 512, NUL-terminated in
 * head (513); how many, or 0 when it cannot be read. */
static size_t file_head(const char *path, char *head)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return 0;
    size_t got = fread(head, 1, 512, f);
    fclose(f);
    head[got] = '\0';
    return got;
}

/* The first bytes of a picture attnrun plot writes, by format. */
static bool is_picture(const char *path)
{
    static const char png[8] = "\x89PNG\r\n\x1a\n";
    char head[513];
    size_t got = file_head(path, head);
    return (got >= sizeof png && memcmp(head, png, sizeof png) == 0) ||
           (got >= 5 && memcmp(head, "%PDF-", 5) == 0) ||
           (got >= 5 && memcmp(head, "<?xml", 5) == 0 && strstr(head, "<svg") != NULL);
}

/* Whether the file at path is a page of attnrun view: its mark in its
 * first 512 bytes. */
static bool is_page(const char *path)
{
    char head[513];
    size_t got = file_head(path, head);
    return memchr(head, '\0', got) == NULL && strstr(head, CLI_PAGE_MARK) != NULL;
}

/* Whether the file at path is an analysis attnrun wrote: an HDF5 file
 * whose root's attnrun_analysis is `analysis`.  ATTN_OK when it is, else
 * the failure (ATTN_ENOMEM: not known). */
static int is_analysis(const char *path, const char *analysis)
{
    attn_results *r;
    attn_error err;
    char *value = NULL;
    int status = attn_results_open(path, "/", &r, &err);
    if (status == ATTN_OK)
        status = attn_results_attribute_text(r, "attnrun_analysis", &value, &err);
    if (status == ATTN_OK && (value == NULL || strcmp(value, analysis) != 0))
        status = ATTN_EUSAGE;
    free(value);
    attn_results_close(r);
    return status;
}

/* A reader that could not tell: out of memory, exit 1. */
static int out_of_memory(const char *output)
{
    fprintf(stderr, "attnrun: %s: out of memory\n", output);
    return EXIT_RUNTIME;
}

int cli_check_output(const char *output, const char *input, bool force, const char *kind)
{
    struct stat st;
    attn_results_file *file;
    attn_error err;
    if (attn_same_file(output, input))
        return cli_usage_error("-o '%s' names the results file itself", output);
    int opened = attn_results_file_open(input, &file, &err);
    if (opened == ATTN_ENOMEM)
        return out_of_memory(input);
    if (opened == ATTN_OK) {                  /* else the reader says why */
        bool holds = attn_results_file_holds(file, output);
        attn_results_file_close(file);
        if (holds)
            return cli_usage_error("-o '%s' names a file of the results %s reads (a part of the "
                                   "index, or its parts directory): name a file outside it",
                                   output, input);
    }
    if (lstat(output, &st) == 0) {
        if (!force)
            return cli_usage_error("%s: output exists; use --force to replace it", output);
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            return cli_usage_error("%s: output exists and is not a regular file", output);
        /* --force replaces what attnrun wrote as this output, nothing else */
        const bool picture = strcmp(kind, CLI_OUTPUT_PICTURE) == 0;
        const bool page = strcmp(kind, CLI_OUTPUT_PAGE) == 0;
        const int ours = stat(output, &st) != 0 ? ATTN_OK
                         : picture ? (is_picture(output) ? ATTN_OK : ATTN_EUSAGE)
                         : page    ? (is_page(output) ? ATTN_OK : ATTN_EUSAGE)
                                   : is_analysis(output, kind);
        if (ours == ATTN_ENOMEM)
            return out_of_memory(output);
        char what[64];                        /* "a rollout file", "a census file" */
        snprintf(what, sizeof what, "a %s file", strcmp(kind, "heads") == 0 ? "census" : kind);
        if (ours != ATTN_OK)
            return cli_usage_error("%s: exists and is not %s attnrun wrote; --force replaces only "
                                   "those: name a new file", output,
                                   picture ? "a picture (PNG, PDF or SVG)"
                                   : page  ? "a page"
                                           : what);
    }
    return EXIT_OK;
}

int cli_parse_groups(const char *name, const char *text, bool unique, char ***groups,
                     size_t *count)
{
    size_t n = 1;
    for (const char *p = text; *p != '\0'; p++)
        n += *p == ',';
    cli_free_groups(*groups, *count);
    *count = 0;
    if ((*groups = attn_calloc(n, sizeof **groups)) == NULL)      /* (n) */
        return cli_error(EXIT_RUNTIME, "out of memory");
    for (const char *p = text; *count < n; p += strcspn(p, ",") + 1) {
        const size_t len = strcspn(p, ",");
        if (p[0] != '/')
            return cli_usage_error("%s '%s': expected absolute group paths separated by commas, "
                                   "such as /layer0,/layer1", name, text);
        char *group = attn_malloc(len + 1);
        if (group == NULL)
            return cli_error(EXIT_RUNTIME, "out of memory");
        memcpy(group, p, len);
        group[len] = '\0';
        (*groups)[(*count)++] = group;
        for (size_t i = 0; unique && i + 1 < *count; i++)
            if (strcmp((*groups)[i], group) == 0)
                return cli_usage_error("%s: %s is named twice", name, group);
    }
    return EXIT_OK;
}

void cli_free_groups(char **groups, size_t count)
{
    for (size_t i = 0; groups != NULL && i < count; i++)
        free(groups[i]);
    free(groups);
}

int cli_parse_ranges(const char *name, const char *text, size_t max, const char *what,
                     cli_range **ranges, size_t *count)
{
    size_t n = 1;
    for (const char *p = text; *p != '\0'; p++)
        n += *p == ',';
    free(*ranges);
    *count = 0;
    if ((*ranges = attn_calloc(n, sizeof **ranges)) == NULL)      /* (n) */
        return cli_error(EXIT_RUNTIME, "out of memory");
    const char *p = text;
    for (size_t i = 0; i < n; i++) {
        cli_range *r = &(*ranges)[i];
        bool good = cli_parse_number(p, max, &r->first, &p);
        r->last = r->first;
        if (good && *p == '-')
            good = cli_parse_number(p + 1, max, &r->last, &p) && r->last >= r->first;
        if (!good || *p != (i + 1 < n ? ',' : '\0'))
            return cli_usage_error("%s '%s': expected %s and ranges such as 0,3,5-7", name,
                                   text, what);
        p++;
    }
    *count = n;
    return EXIT_OK;
}

int cli_write_output(attn_atomic *tx, const char *output, bool force, cli_writer write,
                     void *ctx, attn_results_file *read, attn_error *err)
{
    int status = attn_atomic_begin(tx, output, force, err);
    if (status != ATTN_OK)
        return status;
    FILE *file = fopen(tx->temp_path, "wb");
    if (file == NULL) {
        status = attn_fail(err, ATTN_EIO, "%s: cannot write %s: %s", output, tx->temp_path,
                           strerror(errno));
    } else {
        status = write(ctx, file, err);
        if (fclose(file) != 0 && status == ATTN_OK)
            status = attn_fail(err, ATTN_EIO, "%s: cannot write it: %s", output, strerror(errno));
        else if (status != ATTN_OK && strncmp(err->msg, output, strlen(output)) != 0) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            attn_fail(err, status, "%s: %s", output, msg);
        }
    }
    if (status == ATTN_OK)
        status = attn_atomic_flush(tx, err);
    if (status == ATTN_OK && read != NULL)
        status = attn_results_file_check(read, err);
    if (status == ATTN_OK)
        status = attn_atomic_publish(tx, NULL, err);
    if (status != ATTN_OK)
        attn_atomic_abort(tx);
    return status;
}

int cli_results_file(int argc, char **argv, const char **input)
{
    if (optind >= argc)
        return cli_usage_error("no results file given");
    if (argc - optind > 1)
        return cli_usage_error("one results file expected, got %d ('%s', '%s' ...)",
                                argc - optind, argv[optind], argv[optind + 1]);
    *input = argv[optind];
    return EXIT_OK;
}
