/*
 * test_flow.c - attention flow (attn_flow, lib/math/flow.c) against an
 * independent maximum flow: Edmonds and Karp's algorithm (shortest
 * augmenting paths by BFS, 1972) on the whole graph as one dense matrix of
 * capacities, written here from its textbook form, in float64.  Cases by
 * hand: one layer, two layers (the sum of minima), a flow the first wave
 * must send back, the identity.  Random models: dense and sparse, causal
 * or not, rows of 0 (a query that sees no key), on 1 and 2 threads (the
 * same bits); the report (pairs, the cut's gap, causal) and the progress
 * calls; attn_flow_bytes against what attn_flow allocates, and each of its
 * allocations failing in turn (malloc, calloc and free counted here).
 *
 * Legend: n tokens, L layers, V = (L + 1) n nodes of the reference graph.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_support.h"

#include "attn_math.h"
#include "attn_threads.h"

/* ---- the reference: Edmonds-Karp on a dense matrix ---------------------- */

/* The maximum flow from s to t of the capacities cap (V, V), cap[u][v] the
 * edge u -> v; cap is used up (it ends as the residual graph). */
static double edmonds_karp(size_t V, double *cap, size_t s, size_t t)
{
    size_t *parent = malloc(V * sizeof *parent), *queue = malloc(V * sizeof *queue);
    double total = 0;
    assert_non_null(parent);
    assert_non_null(queue);
    for (;;) {
        for (size_t v = 0; v < V; v++)
            parent[v] = SIZE_MAX;
        parent[s] = s;
        size_t head = 0, tail = 0;
        queue[tail++] = s;
        while (head < tail && parent[t] == SIZE_MAX) {
            const size_t u = queue[head++];
            for (size_t v = 0; v < V; v++)
                if (parent[v] == SIZE_MAX && cap[u * V + v] > 1e-15) {
                    parent[v] = u;
                    queue[tail++] = v;
                }
        }
        if (parent[t] == SIZE_MAX)
            break;
        double push = INFINITY;
        for (size_t v = t; v != s; v = parent[v])
            push = fmin(push, cap[parent[v] * V + v]);
        for (size_t v = t; v != s; v = parent[v]) {
            cap[parent[v] * V + v] -= push;
            cap[v * V + parent[v]] += push;
        }
        total += push;
    }
    free(parent);
    free(queue);
    return total;
}

/* flow (n, n) by the reference: node l n + i is token i above layer l. */
static void reference_flow(size_t n, size_t L, const double *a_hat, double *flow)
{
    const size_t V = (L + 1) * n;
    double *cap = malloc(V * V * sizeof *cap);
    assert_non_null(cap);
    for (size_t q = 0; q < n; q++)
        for (size_t j = 0; j < n; j++) {
            memset(cap, 0, V * V * sizeof *cap);
            for (size_t l = 1; l <= L; l++)
                for (size_t to = 0; to < n; to++)
                    for (size_t k = 0; k < n; k++)
                        cap[((l - 1) * n + k) * V + l * n + to] =
                            a_hat[((l - 1) * n + to) * n + k];
            flow[q * n + j] = edmonds_karp(V, cap, j, L * n + q);
        }
    free(cap);
}

/* ---- models --------------------------------------------------------------- */

static uint64_t rng_state;

static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* L layers of Â (n, n): random rows of attention (kept with chance
 * `density`, else 0), lower triangular when causal, row `empty` of each
 * layer all 0 (SIZE_MAX: none), then rownorm((1 - r) W + r I). */
static double *model(size_t n, size_t L, bool causal, double density, double r, size_t empty,
                     uint64_t seed)
{
    double *a = malloc(L * n * n * sizeof *a);
    assert_non_null(a);
    rng_state = seed;
    for (size_t l = 0; l < L; l++) {
        double *w = a + l * n * n;
        for (size_t q = 0; q < n; q++) {
            double sum = 0;
            for (size_t k = 0; k < n; k++) {
                const double x = uniform();
                w[q * n + k] = (causal && k > q) || uniform() > density || q == empty ? 0 : x;
                sum += w[q * n + k];
            }
            for (size_t k = 0; k < n && sum > 0; k++)
                w[q * n + k] /= sum;
        }
        attn_rollout_layer(n, r, w, w);
    }
    return a;
}

/* attn_flow against the reference within 1e-12, its gap at most 1e-13. */
static void check_against_reference(size_t n, size_t L, const double *a, bool causal)
{
    double *got = malloc(n * n * sizeof *got), *want = malloc(n * n * sizeof *want);
    attn_flow_report report;
    assert_int_equal(attn_flow(n, L, a, got, &report, NULL, NULL), ATTN_OK);
    reference_flow(n, L, a, want);
    for (size_t i = 0; i < n * n; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-12))
            fail_msg("n %zu, L %zu: flow[%zu][%zu] %.17g, Edmonds-Karp %.17g", n, L, i / n,
                     i % n, got[i], want[i]);
    assert_true(report.gap <= 1e-13);
    assert_int_equal(report.causal, causal);
    const size_t searched = L < 2 ? 0 : causal ? n * (n + 1) / 2 : n * n;
    assert_int_equal(report.pairs, searched);
    if (causal)
        for (size_t q = 0; q < n; q++)
            for (size_t j = q + 1; j < n; j++)
                assert_true(got[q * n + j] == 0);
    free(got);
    free(want);
}

/* ---- by hand -------------------------------------------------------------- */

/* One layer: each flow is its edge.  Two: token j reaches q through each
 * middle token k, at most min(Â_1[k][j], Â_2[q][k]) along each. */
static void test_one_and_two_layers(void **state)
{
    (void)state;
    const double a[2][4] = {{1, 0, 0.25, 0.75}, {0.5, 0.5, 0.9, 0.1}};
    double flow[4];
    attn_flow_report report;
    assert_int_equal(attn_flow(2, 1, a[0], flow, &report, NULL, NULL), ATTN_OK);
    for (size_t i = 0; i < 4; i++)
        assert_true(flow[i] == a[0][i]);
    assert_int_equal(report.pairs, 0);
    assert_int_equal(attn_flow(2, 2, a[0], flow, &report, NULL, NULL), ATTN_OK);
    /* q 0: j 0: min(1, .5) + min(.25, .5) = .75; j 1: min(0, .5) + min(.75, .5) = .5
     * q 1: j 0: min(1, .9) + min(.25, .1) = 1;  j 1: 0 + min(.75, .1) = .1 */
    const double want[4] = {0.75, 0.5, 1.0, 0.1};
    for (size_t i = 0; i < 4; i++)
        assert_true(fabs(flow[i] - want[i]) <= 1e-15);
    assert_int_equal(report.pairs, 4);
}

/*
 * Three layers of two tokens, token 0 to position 0.  Token 0 reaches both
 * middle tokens a = (1, 0) and b = (1, 1) (capacity 1 each); a goes on to c
 * = (2, 0) and d = (2, 1), b to c alone; c and d reach position 0 with 1
 * each.  A first push of a's and b's flow into c overfills it: one unit
 * must go back and round by d.  The maximum is 2 (by hand: the cut after
 * the source).
 */
static void test_flow_sent_back(void **state)
{
    (void)state;
    const double a[3][4] = {
        {1, 0, 1, 0},            /* Â_1: a <- token 0, b <- token 0 */
        {1, 1, 1, 0},            /* Â_2: c <- a, c <- b; d <- a      */
        {1, 1, 0, 0},            /* Â_3: position 0 <- c, d          */
    };
    double flow[4];
    attn_flow_report report;
    assert_int_equal(attn_flow(2, 3, a[0], flow, &report, NULL, NULL), ATTN_OK);
    assert_true(flow[0] == 2);
    check_against_reference(2, 3, a[0], false);
}

/*
 * The wave takes a node's edges up from where it stopped.  Three layers of
 * three tokens, token 0 to position 0 the only pair with capacity: token 0
 * reaches a = (1, 0) and b = (1, 1) (1 each); a reaches c, d and e of
 * boundary 2 (1 each), b only e (1); c and d reach position 0 (0.5, 1), e
 * nothing.  By hand: the first wave sends a's unit to c and b's to e; c
 * passes 0.5 and sends 0.5 back to a, e sends b's unit back; the second
 * wave takes a's 0.5 on from its edge to c, blocked now, to d, which
 * passes it: flow 1.  The bound is 1.5 (what c and d pass), so one BFS
 * proves it: 2 phases, and 1 for each of the 8 pairs with no capacity.
 */
static void test_wave_resumes_where_it_stopped(void **state)
{
    (void)state;
    const double a[3][9] = {
        {1, 0, 0, 1, 0, 0, 0, 0, 0},       /* Â_1: a, b <- token 0          */
        {1, 0, 0, 1, 0, 0, 1, 1, 0},       /* Â_2: c <- a; d <- a; e <- a, b */
        {0.5, 1, 0, 0, 0, 0, 0, 0, 0},     /* Â_3: position 0 <- c, d       */
    };
    double flow[9];
    attn_flow_report report;
    attn_set_threads(1);
    assert_int_equal(attn_flow(3, 3, a[0], flow, &report, NULL, NULL), ATTN_OK);
    assert_true(flow[0] == 1);
    for (size_t i = 1; i < 9; i++)
        assert_true(flow[i] == 0);
    assert_int_equal(report.pairs, 9);
    assert_int_equal(report.phases, 10);
}

/* An inner edge with at most 1e-14 of capacity left counts as full (the
 * tolerance attn_flow_report.gap states): through one of exactly 1e-14
 * nothing flows, and the cut says 1e-14; one of 2e-14 carries it all. */
static void test_tolerance_of_a_full_edge(void **state)
{
    (void)state;
    double a[3] = {1, 1e-14, 1}, flow;
    attn_flow_report report;
    assert_int_equal(attn_flow(1, 3, a, &flow, &report, NULL, NULL), ATTN_OK);
    assert_true(flow == 0);
    assert_true(report.gap == 1e-14);
    a[1] = 2e-14;
    assert_int_equal(attn_flow(1, 3, a, &flow, &report, NULL, NULL), ATTN_OK);
    assert_true(flow == 2e-14);
    assert_true(report.gap == 0);
}

/* --residual 1: Â = I, every flow the identity, exactly. */
static void test_identity(void **state)
{
    (void)state;
    double *a = model(5, 4, false, 1.0, 1.0, SIZE_MAX, 3);
    double flow[25];
    attn_flow_report report;
    assert_int_equal(attn_flow(5, 4, a, flow, &report, NULL, NULL), ATTN_OK);
    for (size_t i = 0; i < 25; i++)
        assert_true(flow[i] == (i / 5 == i % 5 ? 1.0 : 0.0));
    assert_true(report.causal);            /* the identity is lower triangular */
    free(a);
}

/* ---- random models against the reference ---------------------------------- */

static void test_random_models(void **state)
{
    (void)state;
    static const struct {
        size_t n, L;
        bool causal;
        double density, r;
        size_t empty;
    } cases[] = {
        {4, 2, false, 1.0, 0.5, SIZE_MAX}, {5, 3, false, 1.0, 0.5, SIZE_MAX},
        {6, 4, false, 0.5, 0.1, SIZE_MAX}, {6, 5, true, 1.0, 0.5, SIZE_MAX},
        {7, 4, true, 0.6, 0.0, 0},         {5, 4, false, 0.4, 0.0, 2},
        {3, 6, false, 0.7, 0.25, SIZE_MAX}, {8, 3, true, 0.5, 0.1, 3},
        {1, 3, true, 1.0, 0.5, SIZE_MAX},  {6, 3, false, 0.3, 0.0, SIZE_MAX},
    };
    for (size_t c = 0; c < COUNT(cases); c++)
        for (uint64_t seed = 1; seed <= 4; seed++) {
            double *a = model(cases[c].n, cases[c].L, cases[c].causal, cases[c].density,
                              cases[c].r, cases[c].empty, seed * 101 + c);
            check_against_reference(cases[c].n, cases[c].L, a, cases[c].causal || cases[c].n == 1);
            free(a);
        }
}

/* The same bits on 1 and 2 threads. */
static void test_threads_same_bits(void **state)
{
    (void)state;
    const size_t n = 12, L = 5;
    double *a = model(n, L, false, 0.8, 0.2, 4, 77);
    double one[144], two[144];
    attn_flow_report report;
    attn_set_threads(1);
    assert_int_equal(attn_flow(n, L, a, one, &report, NULL, NULL), ATTN_OK);
    attn_set_threads(2);
    assert_int_equal(attn_flow(n, L, a, two, &report, NULL, NULL), ATTN_OK);
    assert_memory_equal(one, two, sizeof one);
    free(a);
}

/* ---- the report of progress and attn_flow_bytes -------------------------- */

typedef struct progress_seen {
    size_t calls, last_done, total;
} progress_seen;

static void count_progress(size_t done, size_t total, void *context)
{
    progress_seen *seen = context;
    assert_true(done > seen->last_done && done <= total);
    seen->calls++;
    seen->last_done = done;
    seen->total = total;
}

/* On one thread: a call after each of the n rows, done 1 .. n of n. */
static void test_progress_each_row(void **state)
{
    (void)state;
    const size_t n = 6;
    double *a = model(n, 3, false, 1.0, 0.5, SIZE_MAX, 5);
    double flow[36];
    attn_flow_report report;
    progress_seen seen = {0};
    attn_set_threads(1);
    assert_int_equal(attn_flow(n, 3, a, flow, &report, count_progress, &seen), ATTN_OK);
    assert_int_equal(seen.calls, n);
    assert_int_equal(seen.last_done, n);
    assert_int_equal(seen.total, n);
    free(a);
}

/* Nothing for fewer than two layers; more for each thread; overflow is
 * SIZE_MAX. */
static void test_bytes(void **state)
{
    (void)state;
    assert_int_equal(attn_flow_bytes(64, 1, 2), 0);
    const size_t one = attn_flow_bytes(64, 12, 1), two = attn_flow_bytes(64, 12, 2);
    /* shared: the inner layers transposed, (L - 2) n n doubles */
    const size_t shared = 10 * 64 * 64 * sizeof(double);
    assert_true(one > shared);
    /* each search holds at least its (L - 2) n n doubles of what is left */
    assert_true(two - one == one - shared);
    assert_true(two - one >= shared);
    assert_int_equal(attn_flow_bytes(SIZE_MAX / 4, 12, 2), SIZE_MAX);
    assert_int_equal(attn_flow_bytes(1 << 20, 1 << 20, 1 << 12), SIZE_MAX);
}

/* ---- what attn_flow allocates --------------------------------------------
 *
 * libattn is linked in statically, so malloc, calloc and free defined here
 * are the ones it calls: they count the bytes asked for and not given back
 * while `tracking`, and fail the allocation numbered fail_at.  Not under
 * the address sanitizer, whose own allocator must see every block.
 */
#if !defined(__SANITIZE_ADDRESS__)
#define COUNTED_ALLOCATIONS 1
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void __libc_free(void *p);

static bool tracking;
static long allocations, fail_at = -1;    /* allocations counted from 0 */
static size_t in_use, peak_in_use;
static void *blocks[256];                 /* those counted and not freed */
static size_t block_sizes[256], block_count;

static void *counted(void *p, size_t size)
{
    if (p != NULL && tracking && block_count < COUNT(blocks)) {
        blocks[block_count] = p;
        block_sizes[block_count++] = size;
        in_use += size;
        if (in_use > peak_in_use)
            peak_in_use = in_use;
    }
    return p;
}

static bool failing(void)
{
    return tracking && allocations++ == fail_at;
}

void *malloc(size_t size)
{
    return failing() ? NULL : counted(__libc_malloc(size), size);
}

void *calloc(size_t count, size_t size)
{
    return failing() ? NULL : counted(__libc_calloc(count, size), count * size);
}

/* Frees p; a block counted is no longer (the OpenMP runtime may free
 * blocks of its own, made before). */
void free(void *p)
{
    for (size_t i = 0; p != NULL && tracking && i < block_count; i++)
        if (blocks[i] == p) {
            in_use -= block_sizes[i];
            blocks[i] = blocks[--block_count];
            block_sizes[i] = block_sizes[block_count];
            break;
        }
    __libc_free(p);
}

/* attn_flow on one thread with the allocation numbered `fail` failing (-1:
 * none), its allocations counted. */
static int tracked_flow(size_t n, size_t L, const double *a, double *flow, long fail)
{
    attn_flow_report report;
    attn_set_threads(1);
    assert_int_equal(attn_flow(n, L, a, flow, &report, NULL, NULL), ATTN_OK);  /* warm */
    allocations = 0;
    fail_at = fail;
    in_use = peak_in_use = block_count = 0;
    tracking = true;
    const int status = attn_flow(n, L, a, flow, &report, NULL, NULL);
    tracking = false;
    return status;
}
#endif

/* What attn_flow holds while it searches is what attn_flow_bytes says, to
 * the byte (but the one byte it asks for an empty block, two of them when
 * L = 2); it gives every byte back. */
static void test_bytes_are_what_it_allocates(void **state)
{
    (void)state;
#ifdef COUNTED_ALLOCATIONS
    static const size_t shapes[][2] = {{12, 4}, {7, 2}, {20, 7}, {33, 3}, {1, 5}};
    for (size_t c = 0; c < COUNT(shapes); c++) {
        const size_t n = shapes[c][0], L = shapes[c][1];
        double *a = model(n, L, false, 1.0, 0.5, SIZE_MAX, 9), *flow = malloc(n * n * sizeof *flow);
        assert_int_equal(tracked_flow(n, L, a, flow, -1), ATTN_OK);
        const size_t stated = attn_flow_bytes(n, L, 1);
        if (!(peak_in_use >= stated && peak_in_use <= stated + (L == 2 ? 2 : 0)))
            fail_msg("n %zu, L %zu: %zu bytes in use, attn_flow_bytes says %zu", n, L,
                     peak_in_use, stated);
        assert_int_equal(in_use, 0);
        free(a);
        free(flow);
    }
#else
    skip();
#endif
}

/* Each allocation failing in turn: ATTN_ENOMEM, every byte given back. */
static void test_each_allocation_failing(void **state)
{
    (void)state;
#ifdef COUNTED_ALLOCATIONS
    const size_t n = 6, L = 4;
    double *a = model(n, L, false, 1.0, 0.5, SIZE_MAX, 4), flow[36];
    assert_int_equal(tracked_flow(n, L, a, flow, -1), ATTN_OK);
    const long count = allocations;
    assert_true(count >= 16);             /* the graph's and the search's blocks */
    for (long fail = 0; fail < count; fail++) {
        if (tracked_flow(n, L, a, flow, fail) != ATTN_ENOMEM)
            fail_msg("allocation %ld of %ld failing: not ATTN_ENOMEM", fail, count);
        if (in_use != 0)
            fail_msg("allocation %ld of %ld failing: %zu bytes kept", fail, count, in_use);
    }
    free(a);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_and_two_layers),
        cmocka_unit_test(test_flow_sent_back),
        cmocka_unit_test(test_wave_resumes_where_it_stopped),
        cmocka_unit_test(test_tolerance_of_a_full_edge),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_random_models),
        cmocka_unit_test(test_threads_same_bits),
        cmocka_unit_test(test_progress_each_row),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_bytes_are_what_it_allocates),
        cmocka_unit_test(test_each_allocation_failing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
