/*
 * attn_results.h - reading back what attnrun wrote: the float datasets of
 * one group of a results file, a block at a time, and the token strings
 * that label their axes.  The file is opened read-only and treated as
 * untrusted, as inputs are: values kept in other files (external storage,
 * virtual datasets) are not followed, and HDF5's parse of it is marked
 * (attn_parsing_file).
 *
 *     attn_results *r;
 *     attn_results_open("out.h5", "/", &r, &err);
 *     attn_tensor_info w = {.name = "weights"};
 *     attn_results_describe(r, &w, &err);            // (B, H, n, m)
 *     size_t first[4] = {0, 3, 0, 0}, count[4] = {1, 1, n, m};
 *     attn_results_read(r, "weights", first, count, block, &err);   // (n, m)
 *     char **tokens;
 *     attn_results_labels(r, "query_token", 0, n, &tokens, &err);  // or NULL
 *     attn_labels_free(tokens, n);
 *     attn_results_close(r);
 *
 * Each function returns ATTN_OK or a negative attn_status with err filled:
 * ATTN_EINPUT for what the file holds (missing, damaged, not what was
 * asked), ATTN_EIO when another program holds it locked for writing or
 * the system fails to open it (no permission, no descriptor left),
 * ATTN_ENOMEM.  Messages name the file, the group and the dataset.
 */
#ifndef ATTN_RESULTS_H
#define ATTN_RESULTS_H

#include "attn_common.h"

typedef struct attn_results attn_results;

/* Opens the group `group` ("/" or a path) of the results file at path. */
int attn_results_open(const char *path, const char *group, attn_results **results,
                      attn_error *err);

/* Closes the file; results may be NULL. */
void attn_results_close(attn_results *results);

/* The path and the group it was opened with, for messages. */
const char *attn_results_path(const attn_results *results);
const char *attn_results_group(const attn_results *results);

/*
 * Fills info->present, rank and dims for the dataset info->name of the
 * group: present false when the group has no such link (no error).
 * ATTN_EINPUT when it is not a floating-point dataset, keeps its values in
 * other files, or its shape cannot be read.
 */
int attn_results_describe(attn_results *results, attn_tensor_info *info, attn_error *err);

/* Reads the block [first, first + count) (one index and one length per
 * axis of the dataset) as float into values (the product of count),
 * row-major. */
int attn_results_read(attn_results *results, const char *name, const size_t *first,
                      const size_t *count, float *values, attn_error *err);

/*
 * The strings of the dataset `name` of the group -- (length), the same for
 * every item, or (B, length): row `item` -- variable- or fixed-length,
 * into *labels (length), each a string of its own.  *labels is NULL when
 * the group has no such dataset.  ATTN_EINPUT when it holds something else,
 * another length, or no row `item`.
 */
int attn_results_labels(attn_results *results, const char *name, size_t item, size_t length,
                        char ***labels, attn_error *err);

/* Frees labels (count strings) of attn_results_labels; NULL does nothing. */
void attn_labels_free(char **labels, size_t count);

/* The groups of a results file that hold results (attn_results_groups). */
typedef struct attn_result_groups {
    bool index;                   /* the file is an index of appended
                                     results: each group is one appended
                                     run, kept in a file of its own      */
    size_t count;
    char **paths;                 /* (count) "/layer0", ...: an index's
                                     groups in its order, else every group
                                     holding a run's results (its
                                     attnrun_version attribute) by name  */
} attn_result_groups;

/*
 * Lists the groups of the results file at path that hold results, for a
 * reader to offer when the group asked for holds none.  Read as
 * attn_results_open reads (untrusted: only hard links are followed in a
 * plain file; an index's links are checked to be its own parts, not
 * followed).  Returns ATTN_OK, or the failure with err filled; free what
 * it filled with attn_result_groups_free.
 *
 *     attn_result_groups g;
 *     if (attn_results_groups("results.h5", &g, &err) == ATTN_OK && g.count > 0)
 *         printf("%s%s\n", g.index ? "an index of " : "", g.paths[0]);
 *     attn_result_groups_free(&g);
 */
int attn_results_groups(const char *path, attn_result_groups *groups, attn_error *err);

void attn_result_groups_free(attn_result_groups *groups);

#endif
