/*
 * attn_run.h - the pipeline: input file -> plan -> slices of the batch
 * through the math -> output file, all or nothing.
 *
 * It joins the h5 layer (files), attn_plan (shapes) and attn_math (numbers);
 * memory is bounded by one slice of the batch, never by the batch.
 *
 *     attn_atomic tx;
 *     attn_run_options opt = attn_run_defaults();
 *     opt.input = "in.h5"; opt.output = "out.h5"; opt.heads = 12;
 *     opt.transaction = &tx;
 *     attn_run_report report;
 *     int status = attn_run(&opt, &report, &err);
 */
#ifndef ATTN_RUN_H
#define ATTN_RUN_H

#include "attn_atomic.h"
#include "attn_common.h"
#include "attn_plan.h"

#include <signal.h>

/* How the projection weights are stored. */
typedef enum attn_weight_layout {
    ATTN_LAYOUT_DEFAULT,   /* the preset's, else xw                          */
    ATTN_LAYOUT_XW,        /* y = x W (the default; GPT-2 Conv1D)            */
    ATTN_LAYOUT_LINEAR,    /* y = x W^T (torch.nn.Linear, every HF *_proj)    */
    ATTN_LAYOUT_COUNT
} attn_weight_layout;

/* "xw", "linear"; "" for ATTN_LAYOUT_DEFAULT. */
const char *attn_weight_layout_name(attn_weight_layout layout);

/* A model family: its weight names, layout and fixed semantics. */
typedef struct attn_preset {
    const char *name;
    attn_weight_layout layout;
    bool causal, alibi, qkv_heads;
    bool rope;                          /* needs --rope THETA                 */
    attn_rope_style rope_style;
    const char *names[ATTN_IN_COUNT];   /* under --weights-group; biases are
                                           used when present               */
} attn_preset;

/* The presets attnrun knows, 0 to attn_preset_count() - 1, in the order
 * they are listed. */
size_t attn_preset_count(void);
const attn_preset *attn_preset_at(size_t index);

/* The preset called name, or NULL. */
const attn_preset *attn_preset_find(const char *name);

/* "gpt2, torch-mha, ...": every preset's name, for messages. */
const char *attn_preset_list(void);

/*
 * The likely mistakes a run warns of: inputs and options that run without
 * an error but almost surely not as meant.  The library only reports them
 * (attn_run_options.warn), in its own terms; the caller words them.  Each
 * kind is reported at most once per run, with the facts of the whole run
 * (under MPI the job's, on rank 0 alone), and only when the run succeeds:
 * the plan's kinds also for a dry run, the data's (read from the input)
 * once the output is in place.  A warning changes nothing of the run.
 */
typedef enum attn_warning_kind {
    ATTN_WARN_MASK_HIDES_ALL,   /* the mask keeps no key of some items: their
                                   weights and heads are all 0          */
    ATTN_WARN_ZERO_WEIGHTS,     /* projection weights that hold only zeros  */
    ATTN_WARN_SCALE_RECIPROCAL, /* the scale given is sqrt(d_k) or d_k: the
                                   reciprocal of a usual scale          */
    ATTN_WARN_ROWS_SEE_NO_KEY,  /* the mask (with the causal mask and the
                                   window) leaves most query rows of the
                                   batch no key, although it hides no
                                   item whole: their weights are all 0 */
    ATTN_WARN_COUNT
} attn_warning_kind;

/* "mask-hides-all", "zero-weights", "scale-reciprocal", "rows-see-no-key". */
const char *attn_warning_name(attn_warning_kind kind);

/* One warning's facts; each kind fills its own (the rest 0).  The
 * strings live as long as the call. */
typedef struct attn_warning {
    attn_warning_kind kind;
    /* MASK_HIDES_ALL, ROWS_SEE_NO_KEY */
    const char *mask;           /* the mask dataset's name                 */
    bool inverted;              /* it was read inverted (mask_invert)      */
    size_t items, batch;        /* items whose mask keeps no key, of B     */
    /* ROWS_SEE_NO_KEY */
    size_t rows, total_rows;    /* query rows that see no key, of B n      */
    bool causal;                /* the causal mask is on                   */
    /* ZERO_WEIGHTS */
    unsigned inputs;            /* bits (1u << attn_input) of the weights  */
    const char *names[ATTN_IN_COUNT]; /* their dataset names               */
    /* SCALE_RECIPROCAL */
    double scale;               /* the scale given                         */
    size_t d_k;
    bool squared;               /* it is d_k (else sqrt(d_k))              */
    double usual;               /* 1/sqrt(d_k), the default scale          */
} attn_warning;

typedef struct attn_run_options {
    const char *input;                  /* IN.h5                               */
    const char *output;                 /* OUT.h5; NULL with in_place or dry_run */
    bool in_place;                      /* write into IN under `group`         */
    bool force;                         /* replace OUT / existing target names */
    bool dry_run;                       /* plan only: fill the report, write nothing */
    bool allow_nonfinite;               /* accept NaN and infinities in inputs */
    bool allow_external;                /* follow external links, external raw
                                           storage and virtual datasets     */
    bool allow_plugins;                 /* let HDF5 load filter plugins       */
    bool wait;                          /* wait for another program's lock on
                                           IN instead of failing             */
    attn_variant variant;               /* the attention's settings as asked
                                           (attn_math.h): scale 0 = 1/sqrt(d_k),
                                           rope.dim 0 = d_k, rope.style
                                           DEFAULT and causal false = the
                                           preset's                         */
    const char *names[ATTN_IN_COUNT];   /* dataset names; NULL = the preset's
                                           or the default ("X", "W_Q", ...
                                           "b_O"; none for the others);
                                           "none" drops a bias             */
    const char *weights_group;          /* where parameter names are looked
                                           up (NULL = "/"); names starting
                                           with "/" are taken as they are */
    const char *preset;                 /* a model family (attn_preset_find);
                                           NULL = none                      */
    attn_weight_layout layout;          /* how weights are stored            */
    bool qkv_heads;                     /* --wqkv holds q|k|v per head        */
    size_t heads;                       /* --heads; 0 = from 3-D weights      */
    size_t kv_heads;                    /* --kv-heads; 0 = from W_K's shape   */
    bool alibi;                         /* ALiBi (slopes from --alibi-slopes,
                                           else the standard ones)          */
    bool mask_invert;                   /* the mask's nonzero = masked        */
    const char *group;                  /* where outputs go ("/")             */
    unsigned save;                      /* bits (1u << attn_output)           */
    attn_precision precision;
    attn_store store;                   /* the maps' stored type; DEFAULT: the
                                           precision's                      */
    int compress;                       /* 0-9                                */
    int threads;                        /* compute threads, 1 to
                                           attn_thread_limit(); 0 = default */
    size_t slice_items;                 /* batch items per slice; 0 = by memory */
    size_t memory_budget;               /* cap on one step's buffers (two are
                                           in flight); 0 = by the threads and
                                           the machine (attn_plan_default_memory) */
    const char *command_line;           /* stored as provenance               */
    volatile sig_atomic_t *cancel;      /* nonzero: stop (ATTN_EINTR) at the next
                                           step, while waiting for a lock, or
                                           at the latest just before the
                                           output is renamed into place; may
                                           be NULL                            */
    /* Called on the calling thread as the work goes, in the unit of
     * attn_run_work: total = B attn_run_work(report, 0, n), done = the
     * work computed, rising (each call above the one before) to total,
     * which is reported once the last results are written.  It is called
     * after each step (one block of query rows of a slice) is written,
     * done = every earlier item whole, then the work of rows [0, r) of
     * each of the step's items; and inside a step, at most every tenth
     * of a second while its attention is computed, done = the work before
     * the step and the pairs its finished tasks saw (attn_progress).
     * With a shared file (MPI) only after each step, on every rank with
     * every rank's work summed.  The report's plan (layout, config,
     * slice_items, slice_rows) is filled before the first call, so the
     * callback may read it.  Returning false stops the run (ATTN_EIO).
     * May be NULL. */
    bool (*progress)(size_t done, size_t total, void *context);
    void *progress_context;
    /* Called once for each likely mistake found (attn_warning above), on
     * the calling thread; may be NULL (then the run looks for none). */
    void (*warn)(const attn_warning *warning, void *context);
    void *warn_context;
    attn_atomic *transaction;           /* caller-owned, so a signal handler
                                           can remove its temp_path; may be
                                           NULL for a dry run                 */
    const char *tokens;                 /* strings labelling the queries (and
                                           the keys of self-attention): a
                                           dataset, or OBJECT@ATTRIBUTE
                                           (attn_tokens.h); NULL = none     */
    const char *kv_tokens;              /* the same for the keys of
                                           cross-attention; NULL = none      */
    bool append;                        /* `output` is a results index: add
                                           the results as the group `group`
                                           of it (lib/h5/index.h); not with
                                           in_place, not at "/"            */
    bool x_sequence_first;              /* a rank-3 X is stored (n, B, D), as
                                           torch keeps it with batch_first=
                                           False: read item b as X[:, b]   */
    size_t first_items;                 /* compute only items [0, first_items)
                                           of the batch (the outputs' batch
                                           axis that long); 0 = every item.
                                           A check that re-runs one item
                                           under other settings uses it   */
} attn_run_options;

/* What the run planned (and, unless dry_run, did). */
typedef struct attn_run_report {
    attn_layout layout;
    attn_config config;                 /* the layer's settings, preset and
                                           options combined: the variant
                                           as computed (config.alibi is not
                                           kept: see alibi)                */
    bool alibi;                         /* ALiBi: --alibi, --alibi-slopes or
                                           the preset                      */
    size_t slice_items;                 /* batch items per slice              */
    size_t slice_bytes;                 /* buffer bytes of one step (one
                                           slice by slice_rows rows)        */
    size_t slice_rows;                  /* query rows per block (n: all)      */
    size_t memory_cap;                  /* the cap the steps were sized under */
    size_t held_bytes;                  /* what the steps hold at once
                                           (attn_plan_held_bytes): two
                                           steps' inputs and packed chunks,
                                           the compute buffers, the threads'
                                           scratch; under memory_cap but for
                                           the least step                  */
    size_t least_bytes;                 /* what the least step holds: one
                                           item, least_rows rows           */
    size_t least_rows;                  /* the fewest rows of a step: one
                                           tile of the maps (n when fewer) */
    size_t slide_keys;                  /* with sliding keys (a causal window
                                           in blocks of rows): the most keys
                                           whose k and v a step holds, and
                                           rows of X it reads; else 0     */
    size_t scratch_bytes;               /* of held_bytes and least_bytes:
                                           the threads' scratch            */
    size_t step_blocks;                 /* blocks of one full step (attn_plan_step_blocks) */
    size_t threads;                     /* compute threads                    */
    attn_store store;                   /* the maps' stored type              */
    bool online;                        /* no maps saved: online softmax      */
    double flops;
    unsigned save;
    size_t output_bytes[ATTN_OUT_COUNT];/* stored, uncompressed: the maps'
                                           tiles that some query sees        */
    size_t total_bytes;                 /* of the saved outputs               */
    size_t output_chunk[ATTN_OUT_COUNT][4]; /* each output's chunk shape (its
                                           rank: attn_output_shape)          */
    attn_store output_store[ATTN_OUT_COUNT]; /* each output's stored type   */
    attn_tensor_info inputs[ATTN_IN_COUNT]; /* the shape of each input used
                                           (present false: not used); the
                                           names are not kept (NULL)         */
} attn_run_report;

/*
 * The settings of a run, one table (lib/run/settings.c) that says, for
 * each, what the output group's provenance attributes record and what the
 * plans of a dry run show: the JSON plan (docs/outputs.md, "Plans as JSON") and
 * the text plan.  A new setting is one row there.
 *
 *     for (size_t i = 0; i < attn_setting_count(); i++) {
 *         const attn_setting *s = attn_setting_at(i);
 *         attn_setting_value v = attn_setting_value_of(i, &opt, &report);
 *         ...
 *     }
 */
typedef enum attn_setting_kind {
    ATTN_SETTING_TEXT,          /* a string                                 */
    ATTN_SETTING_INTEGER,       /* a whole number                           */
    ATTN_SETTING_REAL,          /* a double                                 */
    ATTN_SETTING_FLAG           /* yes or no: 1 or 0 in provenance          */
} attn_setting_kind;

/* Where a setting is shown: bits of attn_setting.shown. */
enum {
    ATTN_SHOWN_PROVENANCE = 1,  /* an attribute of the output group, `name` */
    ATTN_SHOWN_TEXT = 2,        /* a line of the text plan, `name` and value,
                                   when the run uses it                   */
    ATTN_SHOWN_JSON_NULL = 4    /* the JSON plan says null when the run does
                                   not use it (else its value, as always) */
};

typedef struct attn_setting {
    const char *name;           /* provenance attribute, text plan label    */
    const char *json;           /* its place in the JSON plan, or NULL: a
                                   key ("precision"), or a path into an
                                   object ("variant.rope.theta")          */
    attn_setting_kind kind;
    unsigned shown;             /* ATTN_SHOWN_* bits                        */
} attn_setting;

/* One run's value of a setting. */
typedef struct attn_setting_value {
    bool used;                  /* the run uses it (else provenance records
                                   0 or "" and the text plan leaves it out) */
    const char *text;           /* ATTN_SETTING_TEXT                        */
    long long integer;          /* ATTN_SETTING_INTEGER, and 0 or 1 for FLAG */
    double real;                /* ATTN_SETTING_REAL                        */
} attn_setting_value;

/* The rows of the table, 0 to attn_setting_count() - 1, in order. */
size_t attn_setting_count(void);
const attn_setting *attn_setting_at(size_t index);

/* Setting `index` of the run that options asked for and attn_run planned
 * (report; a dry run's will do).  The settings that name the datasets a
 * run read are known only inside the run (provenance): "" here. */
attn_setting_value attn_setting_value_of(size_t index, const attn_run_options *options,
                                         const attn_run_report *report);

/*
 * The work of query rows [row0, row0 + rows) of one item as the run's
 * progress counts it (attn_run_options.progress), from report's plan
 * (layout.dims, config.variant): the (query, key) pairs those rows see
 * under the causal mask and the window (attn_visible_pairs; keys a
 * padding mask hides are counted, as the mask is read only with its
 * item), plus 2 for each row (its q and its output projected), plus m
 * when row0 is 0 (the item's keys projected to k and v).  One item's
 * work is attn_run_work(report, 0, n); the run's, B times that.
 * Saturates at SIZE_MAX.
 */
size_t attn_run_work(const attn_run_report *report, size_t row0, size_t rows);

/* Options with every default of docs/contract.md §5 filled in. */
attn_run_options attn_run_defaults(void);

/* The default dataset name of an input ("X", "W_Q", ...; NULL for the
 * optional inputs). */
const char *attn_input_default_name(attn_input which);

/*
 * Runs the whole computation.  IN is locked for the whole run (shared; for
 * --in-place exclusive, until its copy is renamed over it).  Returns
 * ATTN_OK, or
 *   ATTN_EUSAGE  OUT exists without force, OUT is IN or names no file, a
 *                name in the way of --in-place, bad option values; with
 *                append, OUT is not a results index or holds the group
 *                (without force, see attn_index_check);
 *   ATTN_EINPUT  the input was rejected (missing, shape, type, non-finite,
 *                not a regular file, values that overflow the precision);
 *   ATTN_EIO     reading or writing failed, IN is locked by another
 *                program or changed while it was read, threads that
 *                cannot start;
 *   ATTN_ENOMEM  a buffer (or the address space for it) is not there;
 *   ATTN_EINTR   *cancel became nonzero.
 * On failure no output file and no temporary file remain, and IN is as it was
 * (with append: the index and its parts are as they were).
 */
int attn_run(const attn_run_options *options, attn_run_report *report, attn_error *err);

#endif
