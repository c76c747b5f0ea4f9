/*
 * plan_json.h - the plan of a dry run as one JSON object (--dry-run
 * --json): its keys and their meaning are docs/outputs.md's "Plans as
 * JSON"; keys are only ever added, and PLAN_JSON_SCHEMA goes up whenever the meaning
 * of one changes.  Only cmd/ uses it.
 *
 *     attn_run(&opt, &report, &err);        // opt.dry_run = true
 *     plan_json_print(stdout, &opt, &report);
 */
#ifndef ATTN_CMD_PLAN_JSON_H
#define ATTN_CMD_PLAN_JSON_H

#include "attn_run.h"

#include <stdio.h>

#define PLAN_JSON_SCHEMA 1

/* numpy's name of a stored type ("float16", "bfloat16", "float32",
 * "float64", "int32"): the dtype both forms of the plan print. */
const char *plan_dtype_name(attn_store store);

/* Writes the plan of a dry run (options and the report attn_run filled)
 * on one line; write errors are left in out (ferror). */
void plan_json_print(FILE *out, const attn_run_options *opt, const attn_run_report *rep);

#endif
