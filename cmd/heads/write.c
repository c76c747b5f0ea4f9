/*
 * write.c - the census written (heads.h): CSV on standard output, and the
 * HDF5 file of -o -- one (L, H) float64 dataset per score, along the axes
 * "layer" and "head", with the groups' paths as the layer's coordinate.
 * Both walk the census table of attn_math.h (attn_census_name, ...).
 *
 * Legend: L layers, H heads.
 */
#include "heads/heads.h"

#include "attn_results.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The dataset of the groups' paths, and the attributes of the file. */
#define LAYER_GROUP "layer_group"
#define LAYER_GROUP_DESCRIPTION "the group of each layer in the results file"
#define ANALYSIS "heads"

/* A CSV field: as it is, or quoted (quotes doubled) when it holds a
 * comma, a quote or a line break. */
static void print_field(const char *text, FILE *out)
{
    if (strpbrk(text, ",\"\r\n") == NULL) {
        fputs(text, out);
        return;
    }
    fputc('"', out);
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '"')
            fputc('"', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

/* ",value": float-exact digits; empty when no row qualified (or the
 * layer has no tokens), "nan" when the weights held a NaN. */
static void print_score(const attn_census *census, attn_census_kind kind, FILE *out)
{
    fputc(',', out);
    if (census->rows[kind] == 0)
        return;
    const double value = attn_census_score(census, kind);
    if (isnan(value))
        fputs("nan", out);
    else
        fprintf(out, "%.9g", value);
}

void heads_print_csv(const census_table *census, FILE *out)
{
    fputs("layer,head", out);
    for (int k = 0; k < ATTN_CENSUS_COUNT; k++)
        fprintf(out, ",%s", attn_census_name((attn_census_kind)k));
    fputc('\n', out);
    for (size_t l = 0; l < census->count; l++) {
        const census_layer *layer = &census->layers[l];
        for (size_t h = 0; h < census->heads; h++) {
            print_field(layer->group, out);
            fprintf(out, ",%zu", h);
            for (int k = 0; k < ATTN_CENSUS_COUNT; k++)
                print_score(&layer->census[h], (attn_census_kind)k, out);
            fputc('\n', out);
        }
    }
}

/* The dataset of score `kind`: values (L, H), NaN where no row qualified. */
static int write_score(attn_results_out *o, const census_table *census, attn_census_kind kind,
                       double *values, attn_error *err)
{
    const size_t dims[2] = {census->count, census->heads};
    const char *const axes[2] = {"layer", "head"};
    int handle;
    for (size_t l = 0; l < census->count; l++)
        for (size_t h = 0; h < census->heads; h++)
            values[l * census->heads + h] = attn_census_score(&census->layers[l].census[h], kind);
    int status = attn_results_add(o, attn_census_name(kind), 2, dims, axes, ATTN_F64,
                                  ATTN_STORE_F64, attn_census_description(kind), &handle, err);
    if (status == ATTN_OK)
        status = attn_results_attribute(o, handle, "coordinates", LAYER_GROUP, err);
    if (status == ATTN_OK)
        status = attn_results_write(o, handle, (const size_t[2]){0, 0}, dims, values, err);
    return status;
}

/* layer_group (L): each layer's group path, along "layer". */
static int write_groups(attn_results_out *o, const census_table *census, attn_error *err)
{
    const char *const axes[1] = {"layer"};
    const char **groups = attn_calloc(census->count, sizeof *groups);      /* (L) */
    int handle;
    if (groups == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    for (size_t l = 0; l < census->count; l++)
        groups[l] = census->layers[l].group;
    int status = attn_results_add_labels(o, LAYER_GROUP, 1, &census->count, axes,
                                         LAYER_GROUP_DESCRIPTION, &handle, err);
    if (status == ATTN_OK)
        status = attn_results_write_labels(o, handle, (const size_t[1]){0}, &census->count,
                                           groups, err);
    free(groups);
    return status;
}

int heads_write_file(const census_table *census, const char *path, const char *label,
                     attn_error *err)
{
    attn_results_out *o;
    double *values = attn_calloc(census->count * census->heads, sizeof *values);   /* (L, H) */
    if (values == NULL)
        return attn_fail(err, ATTN_ENOMEM, "out of memory");
    int status = attn_results_create(path, label, &o, err);
    if (status != ATTN_OK) {
        free(values);
        return status;
    }
    for (int k = 0; k < ATTN_CENSUS_COUNT && status == ATTN_OK; k++)
        if (census->tokens || !attn_census_needs_tokens((attn_census_kind)k))
            status = write_score(o, census, (attn_census_kind)k, values, err);
    if (status == ATTN_OK)
        status = write_groups(o, census, err);
    if (status == ATTN_OK)
        status = attn_results_attribute(o, -1, "attnrun_version", ATTN_VERSION, err);
    if (status == ATTN_OK)
        status = attn_results_attribute(o, -1, "attnrun_analysis", ANALYSIS, err);
    if (status == ATTN_OK)
        status = attn_results_attribute(o, -1, "source", census->source, err);
    attn_error closing;
    const int closed = attn_results_finish(o, &closing);
    if (status == ATTN_OK && closed != ATTN_OK) {
        *err = closing;
        status = closed;
    }
    free(values);
    return status;
}
