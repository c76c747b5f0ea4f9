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

/*
 * A results file opened once for a reader that reads several of its
 * groups: the file named (a results file, or an --append index and the
 * parts it names) is opened as the run opens an input -- a regular file
 * only, without blocking, under a shared lock, HDF5's parse capped in
 * memory -- and an index is read once.  Its links are resolved in the
 * parts directory beside it and nowhere else (not the working directory,
 * not HDF5_EXT_PREFIX); each part is opened by attnrun itself, with the
 * same checks, and must be the same file every time it is opened again:
 * a reader sees one generation of the index (ATTN_EIO, "the index
 * changed while it was read", when not).  Close the groups before the
 * file.
 *
 *     attn_results_file *f;
 *     attn_results_file_open("results.h5", &f, &err);
 *     attn_results_open_group(f, "/layer3", &r, &err);  ... attn_results_close(r);
 *     attn_results_file_check(f, &err);    // before committing what was read
 *     attn_results_file_close(f);
 */
typedef struct attn_results_file attn_results_file;

int attn_results_file_open(const char *path, attn_results_file **file, attn_error *err);

/* Closes the file; file may be NULL. */
void attn_results_file_close(attn_results_file *file);

/* The path it was opened with, for messages. */
const char *attn_results_file_path(const attn_results_file *file);

/* Whether path names one of the file's parts (an index's), under any
 * name, or a file (existing or not) in its parts directory. */
bool attn_results_file_holds(const attn_results_file *file, const char *path);

/* Opens the group `group` ("/" or a path) of the open file. */
int attn_results_open_group(attn_results_file *file, const char *group, attn_results **results,
                            attn_error *err);

/*
 * Whether what was read is still what the file holds: a plain file the
 * same size and modification time, its path still naming it; an index
 * whose groups that were read still name the parts that were read (an
 * index that only gained groups is the same for what was read).
 * ATTN_EIO ("changed while it was read") when not.
 */
int attn_results_file_check(attn_results_file *file, attn_error *err);

/* Opens the group `group` ("/" or a path) of the results file at path: a
 * file of its own (attn_results_file_open), closed with the group. */
int attn_results_open(const char *path, const char *group, attn_results **results,
                      attn_error *err);

/* Closes the group (and the file it opened); results may be NULL. */
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

/* The same block as double (a float64 dataset without rounding). */
int attn_results_read_doubles(attn_results *results, const char *name, const size_t *first,
                              const size_t *count, double *values, attn_error *err);

/*
 * The strings of the dataset `name` of the group -- (length), the same for
 * every item, or (B, length): row `item` -- variable- or fixed-length,
 * into *labels (length), each a string of its own.  *labels is NULL when
 * the group has no such dataset.  ATTN_EINPUT when it holds something else,
 * another length, or no row `item`.
 */
int attn_results_labels(attn_results *results, const char *name, size_t item, size_t length,
                        char ***labels, attn_error *err);

/* Fills info->present, rank and dims for the strings info->name of the
 * group (tokens): present false when there is none.  ATTN_EINPUT when
 * it is not a dataset of strings of rank 1 or 2. */
int attn_results_describe_labels(attn_results *results, attn_tensor_info *info, attn_error *err);

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

/* The same for an open file (an index: its groups when it was opened). */
int attn_results_file_groups(attn_results_file *file, attn_result_groups *groups,
                             attn_error *err);

void attn_result_groups_free(attn_result_groups *groups);

/*
 * The string attribute `name` of the group opened (of the file's root for
 * "/"), such as the attnrun_analysis an analysis file carries, into
 * *value: a string of its own (free it), or NULL when the group has no
 * such attribute.  ATTN_EINPUT when it is not one string (variable- or
 * fixed-length, scalar or of one element), ATTN_ENOMEM.
 *
 *     char *kind;
 *     attn_results_attribute_text(r, "attnrun_analysis", &kind, &err);  // "heads", or NULL
 *     free(kind);
 */
int attn_results_attribute_text(attn_results *results, const char *name, char **value,
                                attn_error *err);

/*
 * Writing an analysis of results (attnrun rollout, attnrun heads) into a
 * new file: float datasets with labelled axes, each axis a dimension scale
 * (a dataset named after the axis holding 0, 1, ...), strings as
 * coordinates, string attributes.  Write into the temporary of an
 * attn_atomic transaction, so that the destination is whole or absent.
 *
 *     attn_results_out *o;
 *     attn_results_create(tx.temp_path, "rollout.h5", &o, &err);
 *     size_t dims[4] = {B, L, n, n};
 *     const char *axes[4] = {"batch", "layer", "query", "key"};
 *     int h;
 *     attn_results_add(o, "rollout", 4, dims, axes, ATTN_F64, ATTN_STORE_F32,
 *                      "attention rollout (Abnar & Zuidema 2020)", &h, &err);
 *     size_t first[4] = {b, 0, 0, 0}, count[4] = {1, L, n, n};
 *     attn_results_write(o, h, first, count, values, &err);   // doubles
 *     attn_results_finish(o, &err);       // closes; o freed either way
 *
 * Each returns ATTN_OK or a negative attn_status with err filled (ATTN_EIO
 * for a failed write, ATTN_ENOMEM).  At most ATTN_RESULTS_OUT_MAX datasets,
 * the strings included, of rank 1 to 4.
 */
typedef struct attn_results_out attn_results_out;

#define ATTN_RESULTS_OUT_MAX 16

/* Creates (truncating) the file at path; messages call it `label`. */
int attn_results_create(const char *path, const char *label, attn_results_out **out,
                        attn_error *err);

/*
 * A dataset `name` of (rank) dims, its axes named `axes` (each attached to
 * its dimension scale, shared by every dataset along that axis name, which
 * must then have one length), with its description.  The values written
 * are of `precision`; the file stores them as `store` (ATTN_STORE_DEFAULT:
 * the precision's type).  Chunks are one row of the last two axes (the
 * last alone for rank 1), deflated at level 1 behind the shuffle filter;
 * never written elements read as 0.
 */
int attn_results_add(attn_results_out *out, const char *name, size_t rank, const size_t *dims,
                     const char *const *axes, attn_precision precision, attn_store store,
                     const char *description, int *handle, attn_error *err);

/* Writes the block values (count[0], ...), row-major, at first[]. */
int attn_results_write(attn_results_out *out, int handle, const size_t *first,
                       const size_t *count, const void *values, attn_error *err);

/* A dataset of UTF-8 strings (rank 1 or 2) along `axes`, and its write. */
int attn_results_add_labels(attn_results_out *out, const char *name, size_t rank,
                            const size_t *dims, const char *const *axes, const char *description,
                            int *handle, attn_error *err);
int attn_results_write_labels(attn_results_out *out, int handle, const size_t *first,
                              const size_t *count, const char *const *labels, attn_error *err);

/* A string attribute of the dataset `handle`, or of the root group when
 * handle is -1 (provenance). */
int attn_results_attribute(attn_results_out *out, int handle, const char *name,
                           const char *value, attn_error *err);

/* A float64 attribute of the root group (a setting such as --residual). */
int attn_results_attribute_number(attn_results_out *out, const char *name, double value,
                                  attn_error *err);

/* Flushes and closes the file; out is freed whatever the result. */
int attn_results_finish(attn_results_out *out, attn_error *err);

#endif
