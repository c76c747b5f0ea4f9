/*
 * heads.h - `attnrun heads`: a census of every head of every layer of a
 * results file, over the whole batch -- the scores of attn_math.h's head
 * census (entropy, distance, first, previous, self, duplicate, induction)
 * as CSV on standard output and, with -o, as HDF5.  The census itself is
 * cli/census.h's (attnrun view shows the same); here two phases, one file
 * each:
 *
 *     heads.c      the command line: options, messages, exit codes, the
 *                  census file written atomically
 *     write.c      the census written: CSV, and the HDF5 file
 *
 *     census_table c;
 *     census_find_layers("results.h5", NULL, 0, &c, &err);   // every layer
 *     census_count(&c, &err);
 *     heads_print_csv(&c, stdout);
 *     census_free(&c);
 *
 * Legend: L layers, B items, H heads (the same in every layer), n
 * queries, m keys (a layer's own).
 */
#ifndef ATTN_CMD_HEADS_H
#define ATTN_CMD_HEADS_H

#include "cli/census.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The census as CSV: the header, then one line per layer and head. */
void heads_print_csv(const census_table *census, FILE *out);

/* The census as a new HDF5 file at path (`label` in messages).  ATTN_OK,
 * ATTN_EIO, ATTN_ENOMEM. */
int heads_write_file(const census_table *census, const char *path, const char *label,
                     attn_error *err);

/* `attnrun heads ...`: argv[0] is "heads".  Returns the exit status. */
int heads_main(int argc, char **argv);

#endif
