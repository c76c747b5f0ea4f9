/*
 * flow.c - attention flow (Abnar & Zuidema 2020, "Quantifying Attention
 * Flow in Transformers") on plain buffers (attn_math.h): for each input
 * token j and position q, the value of a maximum flow from token j below
 * the first layer to position q above the last, through a graph whose
 * edge from key k of boundary l - 1 to query q of boundary l has the
 * capacity Â_l[q, k].
 *
 * Each pair is one maximum-flow problem, solved in float64 on the graph
 * as dense matrices (no adjacency lists: a node's edges to the next
 * boundary are a row of `through`, the flow on them a row of `flow`): a
 * first phase of Karzanov's waves through the layers, then, if the flow
 * is short of the bound no search needs, Dinic's phases.  The graph is
 * built once per item; a pair's flows start at 0 and only the part of a
 * row a search reaches is cleared, so a search costs what it touches.
 * Every search ends with a cut of the value it found
 * (attn_flow_report.gap): the certificate that the flow is maximal.
 *
 * Node (m, k), for boundary m = 1 .. L - 1 and token k, is numbered
 * (m - 1) n + k; the source (token j at boundary 0) is M = (L - 1) n and
 * the sink (position q at boundary L) M + 1.  Boundary 0's other tokens
 * and boundary L's other positions carry no flow of the pair and are left
 * out.  Legend: n tokens, L layers, M = (L - 1) n inner nodes, w the
 * tokens a pair searches (n, or q - j + 1 when every layer is causal).
 */
#include "attn_math.h"
#include "attn_threads.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#else                       /* built without OpenMP (the fuzzer): one thread */
static int omp_get_thread_num(void) { return 0; }
#endif

/* The graph of one item, shared by every search. */
typedef struct flow_net {
    size_t n, layers;             /* n tokens, L >= 2 layers              */
    const double *a_hat;          /* (L, n, n) Â_l[q][k]: key k to query q */
    const double *through;        /* (M - n, n) through[u][q]: the capacity of
                                     the edge from inner node u = (m, k) to
                                     (m + 1, q), for m <= L - 2: Â_(m+1)
                                     transposed, a node's edges in a row    */
    bool causal;                  /* every Â_l is lower triangular         */
} flow_net;

/* One thread's search: the residual graph of one pair and the state of
 * its phases.  Row u of `flow` is the pair's only where stamped with it,
 * and then only below cleared[u]; elsewhere the flow is 0. */
typedef struct flow_search {
    const flow_net *net;
    size_t source, sink;          /* j, q                                  */
    size_t lo, hi;                /* the tokens searched, [lo, hi)         */
    size_t pair;                  /* the pair's stamp, from 1              */
    double *flow;                 /* (M - n, n) like through: the flow on
                                     each inner edge                        */
    size_t *stamp;                /* (M) the pair that cleared u's row     */
    size_t *cleared;              /* (M) row u is the pair's in [lo, this) */
    size_t *next;                 /* (M) the wave's first edge of u that
                                     may take more                         */
    size_t *open;                 /* (M) v if v is not blocked, else a later
                                     node of its boundary towards the first
                                     that is not (first_open)              */
    uint32_t *senders;            /* (M, n) the nodes whose wave sent flow
                                     to v, in order                        */
    uint32_t *sender_count;       /* (M) */
    double *excess;               /* (M) flow in minus flow out, the wave's */
    unsigned char *state;         /* (M) FLOW_BLOCKED | FLOW_ACTIVE | FLOW_RETURNING */
    size_t *active;               /* (L - 1, n) each boundary's nodes not
                                     blocked that hold flow to pass on      */
    size_t *returning;            /* (L - 1, n) each boundary's blocked nodes
                                     that hold flow to return               */
    size_t *active_count;         /* (L - 1) */
    size_t *returning_count;      /* (L - 1) */
    double *source_left;          /* (n) what is left of source -> (1, q)  */
    double *source_flow;          /* (n) the flow on it                    */
    double *sink_left;            /* (n) what is left of (L - 1, k) -> sink */
    int *level;                   /* (M + 2) BFS level, or FLOW_UNREACHED  */
    size_t *arc;                  /* (M + 2) Dinic's current arc           */
    size_t *queue;                /* (M + 2) BFS queue, then the DFS path  */
    double value;                 /* the flow found so far                 */
    size_t phases;                /* phases, summed over pairs             */
} flow_search;

/* Inner nodes: M = (L - 1) n, the source then the sink after them. */
static size_t inner_nodes(const flow_net *net) { return (net->layers - 1) * net->n; }

/* What attn_flow allocates on each thread, in bytes (overflow: SIZE_MAX),
 * as search_alloc does: `flow`; `senders`; nine vectors of the inner
 * nodes (six of size_t, sender_count, excess, state), three of every node
 * (level, arc, queue); three of the tokens and two of the boundaries. */
static size_t search_bytes(size_t n, size_t layers)
{
    const size_t per_inner = 6 * sizeof(size_t) + sizeof(uint32_t) + sizeof(double) + 1;
    const size_t per_node = sizeof(int) + 2 * sizeof(size_t);
    size_t inner, matrix, senders, total, part;
    if (!attn_size_mul(&inner, n, layers - 1) || inner + 2 > UINT32_MAX ||
        !attn_size_mul(&matrix, inner - n, n) || !attn_size_mul(&matrix, matrix, sizeof(double)) ||
        !attn_size_mul(&senders, inner, n) || !attn_size_mul(&senders, senders, sizeof(uint32_t)) ||
        !attn_size_add(&total, matrix, senders) || !attn_size_mul(&part, inner, per_inner) ||
        !attn_size_add(&total, total, part) || !attn_size_mul(&part, inner + 2, per_node) ||
        !attn_size_add(&total, total, part) || !attn_size_mul(&part, n, 3 * sizeof(double)) ||
        !attn_size_add(&total, total, part) ||
        !attn_size_add(&total, total, 2 * (layers - 1) * sizeof(size_t)))
        return SIZE_MAX;
    return total;
}

size_t attn_flow_bytes(size_t n, size_t layers, int threads)
{
    size_t shared, each, total;
    if (layers < 2)
        return 0;
    if (!attn_size_mul(&shared, n, n) || !attn_size_mul(&shared, shared, layers - 2) ||
        !attn_size_mul(&shared, shared, sizeof(double)) ||
        (each = search_bytes(n, layers)) == SIZE_MAX ||
        !attn_size_mul(&each, each, threads > 0 ? (size_t)threads : 1) ||
        !attn_size_add(&total, shared, each))
        return SIZE_MAX;
    return total;
}

static void search_free(flow_search *s)
{
    free(s->flow);
    free(s->stamp);
    free(s->cleared);
    free(s->next);
    free(s->open);
    free(s->senders);
    free(s->sender_count);
    free(s->excess);
    free(s->state);
    free(s->active);
    free(s->returning);
    free(s->active_count);
    free(s->returning_count);
    free(s->source_left);
    free(s->source_flow);
    free(s->sink_left);
    free(s->level);
    free(s->arc);
    free(s->queue);
}

static bool search_alloc(const flow_net *net, flow_search *s)
{
    const size_t n = net->n, inner = inner_nodes(net), nodes = inner + 2;
    memset(s, 0, sizeof *s);
    s->net = net;
    s->flow = attn_malloc((inner - n) * n * sizeof(double));
    s->stamp = attn_calloc(inner, sizeof(size_t));
    s->cleared = attn_malloc(inner * sizeof(size_t));
    s->next = attn_malloc(inner * sizeof(size_t));
    s->open = attn_malloc(inner * sizeof(size_t));
    s->senders = attn_malloc(inner * n * sizeof(uint32_t));
    s->sender_count = attn_malloc(inner * sizeof(uint32_t));
    s->excess = attn_malloc(inner * sizeof(double));
    s->state = attn_malloc(inner);
    s->active = attn_malloc(inner * sizeof(size_t));
    s->returning = attn_malloc(inner * sizeof(size_t));
    s->active_count = attn_malloc((net->layers - 1) * sizeof(size_t));
    s->returning_count = attn_malloc((net->layers - 1) * sizeof(size_t));
    s->source_left = attn_calloc(n, sizeof(double));     /* 0 outside a window */
    s->source_flow = attn_malloc(n * sizeof(double));
    s->sink_left = attn_calloc(n, sizeof(double));
    s->level = attn_malloc(nodes * sizeof(int));
    s->arc = attn_malloc(nodes * sizeof(size_t));
    s->queue = attn_malloc(nodes * sizeof(size_t));
    if (!s->flow || !s->stamp || !s->cleared || !s->next || !s->open || !s->senders ||
        !s->sender_count || !s->excess || !s->state || !s->active || !s->returning ||
        !s->active_count || !s->returning_count || !s->source_left ||
        !s->source_flow || !s->sink_left || !s->level || !s->arc || !s->queue) {
        search_free(s);
        memset(s, 0, sizeof *s);          /* nothing left to free */
        return false;
    }
    return true;
}

/* The boundary (1 .. L - 1) and token of inner node u. */
static size_t boundary_of(const flow_net *net, size_t u) { return u / net->n + 1; }
static size_t token_of(const flow_net *net, size_t u) { return u % net->n; }

/* The flow on the edge from inner node u to token q of the next boundary. */
static double flow_on(const flow_search *s, size_t u, size_t q)
{
    return s->stamp[u] == s->pair && q < s->cleared[u] ? s->flow[u * s->net->n + q] : 0;
}

/* What is left of that edge. */
static double left_on(const flow_search *s, size_t u, size_t q)
{
    return s->net->through[u * s->net->n + q] - flow_on(s, u, q);
}

/* The flow on that edge, to write: its row the pair's up to q. */
static double *flow_at(flow_search *s, size_t u, size_t q)
{
    double *row = s->flow + u * s->net->n;
    if (s->stamp[u] != s->pair) {
        s->stamp[u] = s->pair;
        s->cleared[u] = s->lo;
    }
    for (; s->cleared[u] <= q; s->cleared[u]++)
        row[s->cleared[u]] = 0;
    return row + q;
}

/* The search of pair (j, q): the arcs of the source and the sink set to
 * the pair's capacities, the tokens it searches. */
static void search_start(flow_search *s, size_t j, size_t q)
{
    const flow_net *net = s->net;
    const size_t n = net->n;
    const double *last = net->a_hat + ((net->layers - 1) * n + q) * n;   /* (n) Â_L[q] */
    s->source = j;
    s->sink = q;
    s->lo = net->causal ? j : 0;
    s->hi = net->causal ? q + 1 : n;
    s->pair++;
    for (size_t k = s->lo; k < s->hi; k++) {
        s->source_left[k] = net->a_hat[k * n + j];
        s->source_flow[k] = 0;
        s->sink_left[k] = last[k];
    }
    s->value = 0;
}

/* A residual capacity at most this is used up: without it, rounding would
 * leave arcs of 1e-17 that cost a phase each.  A cut found through it is
 * over the flow by at most this for each of its arcs (attn_flow_report). */
#define FLOW_EPSILON 1e-14

/* Whether an edge with `left` of its capacity can take more. */
static bool has_room(double left) { return left > FLOW_EPSILON; }

/* ---- the first phase: a wave through the layers --------------------------
 *
 * With no flow yet, every shortest path from the source runs through the
 * boundaries in order, so the first phase of Dinic's algorithm is a
 * blocking flow of the layered graph itself.  Karzanov's waves find it
 * without a path search: each node of a boundary, in order, pushes what
 * it holds along its edges to nodes not blocked; a node that cannot pass
 * on all it holds is blocked and, in the wave back, returns the rest along
 * the edges it came by.  Each wave blocks a node or ends the phase.
 */

/* The states of a node in the wave. */
enum { FLOW_BLOCKED = 1, FLOW_ACTIVE = 2, FLOW_RETURNING = 4 };

/* Puts inner node u on its boundary's list of `kind` (FLOW_ACTIVE or
 * FLOW_RETURNING) unless it is on it. */
static void enlist(flow_search *s, size_t u, unsigned char kind)
{
    const size_t n = s->net->n, b = u / n;
    if (s->state[u] & kind)
        return;
    s->state[u] |= kind;
    if (kind == FLOW_ACTIVE)
        s->active[b * n + s->active_count[b]++] = u;
    else
        s->returning[b * n + s->returning_count[b]++] = u;
}

/* The first node from v on, up to end (excluded), that is not blocked;
 * end if none.  The chain of blocked nodes is cut short on the way. */
static size_t first_open(flow_search *s, size_t v, size_t end)
{
    while (v < end && s->open[v] != v) {
        const size_t later = s->open[v];
        if (later < end)
            s->open[v] = s->open[later];
        v = later;
    }
    return v;
}

/* Blocks u: the wave sends it nothing more. */
static void block(flow_search *s, size_t u)
{
    s->state[u] |= FLOW_BLOCKED;
    s->open[u] = u + 1;
    enlist(s, u, FLOW_RETURNING);
}

/* Adds `amount` to what node u of the next or previous boundary holds,
 * to be passed on, or returned if u is blocked. */
static void receive(flow_search *s, size_t u, double amount)
{
    s->excess[u] += amount;
    enlist(s, u, s->state[u] & FLOW_BLOCKED ? FLOW_RETURNING : FLOW_ACTIVE);
}

/* Pushes u's excess to the next boundary (the sink from the last), to
 * nodes not blocked; blocks u if some is left. */
static void wave_forward(flow_search *s, size_t u)
{
    const flow_net *net = s->net;
    const size_t n = net->n, k = token_of(net, u);
    double held = s->excess[u];
    if (boundary_of(net, u) == net->layers - 1) {
        const double sent = held < s->sink_left[k] ? held : s->sink_left[k];
        s->sink_left[k] -= sent;
        s->value += sent;
        held -= sent;
    } else {
        const size_t up = u - k + n;                    /* (m + 1, 0) */
        size_t q = s->next[u];
        while (held > 0 && (q = first_open(s, up + q, up + s->hi) - up) < s->hi) {
            const double left = left_on(s, u, q);
            if (has_room(left)) {
                const double sent = held < left ? held : left;
                if (flow_on(s, u, q) == 0)
                    s->senders[(up + q) * n + s->sender_count[up + q]++] = (uint32_t)u;
                *flow_at(s, u, q) += sent;
                receive(s, up + q, sent);
                held -= sent;
                if (held <= 0)
                    break;        /* the edge may take more: stay on it */
            }
            q++;
        }
        s->next[u] = q;
    }
    s->excess[u] = held;
    if (has_room(held))            /* more than rounding: it cannot pass */
        block(s, u);
}

/* Returns blocked u's excess along the edges that brought it. */
static void wave_return(flow_search *s, size_t u)
{
    const flow_net *net = s->net;
    const size_t n = net->n, k = token_of(net, u);
    double held = s->excess[u];
    s->excess[u] = 0;            /* what rounding leaves is not flow */
    if (boundary_of(net, u) == 1) {
        s->source_flow[k] -= held;
        s->source_left[k] += held;
        return;
    }
    /* the latest senders first (Karzanov's order) */
    const uint32_t *senders = s->senders + u * n;
    for (size_t i = s->sender_count[u]; i-- > 0 && held > 0;) {
        const size_t from = senders[i];
        const double flow = flow_on(s, from, k);
        const double back = held < flow ? held : flow;
        if (back <= 0)
            continue;
        *flow_at(s, from, k) -= back;
        receive(s, from, back);
        held -= back;
    }
}

/* Runs `step` on each node of boundary list b of `kind`, emptying it
 * first: the step may put nodes on other boundaries' lists. */
static void wave_boundary(flow_search *s, size_t b, unsigned char kind,
                          void (*step)(flow_search *, size_t))
{
    const size_t n = s->net->n;
    size_t *list = (kind == FLOW_ACTIVE ? s->active : s->returning) + b * n;
    size_t *count = (kind == FLOW_ACTIVE ? s->active_count : s->returning_count) + b;
    for (size_t i = 0; i < *count; i++)
        s->state[list[i]] &= (unsigned char)~kind;
    const size_t taken = *count;
    *count = 0;
    for (size_t i = 0; i < taken; i++)
        step(s, list[i]);
}

/* The first phase: waves forward and back until no node not blocked
 * holds anything to pass on. */
static void search_wave(flow_search *s)
{
    const flow_net *net = s->net;
    const size_t n = net->n, bounds = net->layers - 1;
    for (size_t b = 0; b < bounds; b++) {
        s->active_count[b] = s->returning_count[b] = 0;
        for (size_t k = s->lo; k < s->hi; k++) {
            s->excess[b * n + k] = 0;
            s->state[b * n + k] = 0;
            s->next[b * n + k] = s->lo;
            s->open[b * n + k] = b * n + k;
            s->sender_count[b * n + k] = 0;
        }
    }
    for (size_t k = s->lo; k < s->hi; k++) {             /* the source's edges full */
        s->source_flow[k] = s->source_left[k];
        s->source_left[k] = 0;
        if (s->source_flow[k] > 0)
            receive(s, k, s->source_flow[k]);
    }
    for (bool more = true; more;) {
        more = false;
        for (size_t b = 0; b < bounds; b++)
            if (s->active_count[b] > 0)
                wave_boundary(s, b, FLOW_ACTIVE, wave_forward);
        for (size_t b = bounds; b-- > 0;)
            if (s->returning_count[b] > 0)
                wave_boundary(s, b, FLOW_RETURNING, wave_return);
        for (size_t b = 0; b < bounds && !more; b++)
            more = s->active_count[b] > 0;
    }
}

/* ---- later phases: Dinic's levels and paths -------------------------------
 *
 * After the first phase a shortest path may go back along an edge that
 * carries flow.  Arc a of the source goes to (1, lo + a); of inner node
 * (m, k), the first go forward -- to (m + 1, lo + a), or to the sink alone
 * from boundary L - 1 -- and the rest back to (m - 1, lo + a') along an
 * edge that carries flow; from boundary 1 they all go back to the source,
 * which the BFS labels first: never on a shortest path, never pushed.
 * The sink has none.
 */

static size_t forward_arcs(const flow_search *s, size_t u)
{
    const flow_net *net = s->net;
    if (u == inner_nodes(net))
        return s->hi - s->lo;
    return boundary_of(net, u) == net->layers - 1 ? 1 : s->hi - s->lo;
}

static size_t arc_count(const flow_search *s, size_t u)
{
    const flow_net *net = s->net;
    if (u >= inner_nodes(net))
        return u == inner_nodes(net) ? s->hi - s->lo : 0;
    return forward_arcs(s, u) + (s->hi - s->lo);
}

/* What is left of arc a of node u, and where it goes (*to). */
static double arc_left(const flow_search *s, size_t u, size_t a, size_t *to)
{
    const flow_net *net = s->net;
    const size_t n = net->n, source = inner_nodes(net);
    if (u == source) {
        *to = s->lo + a;
        return s->source_left[s->lo + a];
    }
    const size_t k = token_of(net, u), forward = forward_arcs(s, u);
    if (a < forward && boundary_of(net, u) == net->layers - 1) {
        *to = source + 1;
        return s->sink_left[k];
    }
    if (a < forward) {
        *to = u - k + n + s->lo + a;
        return left_on(s, u, s->lo + a);
    }
    if (u < n) {                                         /* boundary 1 */
        *to = source;
        return s->source_flow[k];
    }
    *to = u - k - n + s->lo + a - forward;
    return flow_on(s, *to, k);
}

/* Sends `amount` along arc a of node u. */
static void arc_push(flow_search *s, size_t u, size_t a, double amount)
{
    const flow_net *net = s->net;
    const size_t n = net->n, source = inner_nodes(net);
    if (u == source) {
        s->source_left[s->lo + a] -= amount;
        s->source_flow[s->lo + a] += amount;
        return;
    }
    const size_t k = token_of(net, u), forward = forward_arcs(s, u);
    if (a < forward && boundary_of(net, u) == net->layers - 1) {
        s->sink_left[k] -= amount;
        s->value += amount;
    } else if (a < forward) {
        *flow_at(s, u, s->lo + a) += amount;
    } else {
        *flow_at(s, u - k - n + s->lo + a - forward, k) -= amount;
    }
}

/* The level of a node no residual path reaches. */
#define FLOW_UNREACHED (-1)

/* Dinic's BFS: the level of every node a shortest residual path from the
 * source reaches, stopping at the sink's level.  Returns whether it is
 * reached. */
static bool search_levels(flow_search *s)
{
    const size_t source = inner_nodes(s->net), sink = source + 1;
    size_t head = 0, tail = 0;
    for (size_t u = 0; u < source + 2; u++)
        s->level[u] = FLOW_UNREACHED;
    s->level[source] = 0;
    s->queue[tail++] = source;
    while (head < tail) {
        const size_t u = s->queue[head++], arcs = arc_count(s, u);
        for (size_t a = 0; a < arcs; a++) {
            size_t to;
            if (!has_room(arc_left(s, u, a, &to)) || s->level[to] != FLOW_UNREACHED)
                continue;
            s->level[to] = s->level[u] + 1;
            if (to == sink)
                return true;
            s->queue[tail++] = to;
        }
    }
    return false;
}

/* Whether arc a of u leads one level closer to the sink with room left. */
static bool admissible(const flow_search *s, size_t u, size_t a, size_t *to)
{
    const size_t sink = inner_nodes(s->net) + 1;
    const int next = s->level[u] + 1;
    return has_room(arc_left(s, u, a, to)) && s->level[*to] == next &&
           (*to == sink || next < s->level[sink]);
}

/* Pushes the bottleneck along path (depth arcs, path[0] the source);
 * returns the depth to go on from: the tail of the first arc it fills. */
static size_t augment(flow_search *s, const size_t *path, size_t depth)
{
    double push = INFINITY;
    size_t first_full = 0, to;
    for (size_t i = 0; i < depth; i++) {
        const double left = arc_left(s, path[i], s->arc[path[i]], &to);
        if (left < push) {
            push = left;
            first_full = i;
        }
    }
    for (size_t i = 0; i < depth; i++)
        arc_push(s, path[i], s->arc[path[i]], push);
    return first_full;
}

/* Dinic's blocking flow along the levels: depth-first paths, each node's
 * current arc kept, a dead end's level taken away. */
static void search_block(flow_search *s)
{
    const size_t source = inner_nodes(s->net), sink = source + 1;
    size_t *path = s->queue;
    size_t depth = 0;
    for (size_t u = 0; u < source + 2; u++)
        s->arc[u] = 0;
    path[0] = source;
    for (;;) {
        const size_t u = path[depth];
        if (u == sink) {
            depth = augment(s, path, depth);
            continue;
        }
        const size_t arcs = arc_count(s, u);
        size_t a = s->arc[u], to = 0;
        while (a < arcs && !admissible(s, u, a, &to))
            a++;
        s->arc[u] = a;
        if (a < arcs) {
            path[++depth] = to;
        } else if (depth == 0) {
            return;
        } else {
            s->level[u] = FLOW_UNREACHED;     /* a dead end */
            depth--;
            s->arc[path[depth]]++;
        }
    }
}

/* The capacity of the cut between what the last BFS reached and the rest:
 * the bound that proves the flow maximal.  Under a causal model the tokens
 * after q join the source's side and those before j the sink's: no edge
 * of either crosses it. */
static double search_cut(const flow_search *s)
{
    const flow_net *net = s->net;
    const size_t n = net->n, source = inner_nodes(net);
    const double *first = net->a_hat, *last = net->a_hat + (net->layers - 1) * n * n;
    double cut = 0;
    for (size_t q = s->lo; q < s->hi; q++)
        if (s->level[q] == FLOW_UNREACHED)
            cut += first[q * n + s->source];
    for (size_t u = 0; u < source; u++) {
        const size_t k = token_of(net, u);
        if (s->level[u] == FLOW_UNREACHED)
            continue;
        if (boundary_of(net, u) == net->layers - 1) {
            cut += last[s->sink * n + k];
            continue;
        }
        for (size_t q = s->lo; q < s->hi; q++)
            if (s->level[u - k + n + q] == FLOW_UNREACHED)
                cut += net->through[u * n + q];
    }
    return cut;
}

/* The sum of the capacities out of the source and into the sink, within
 * the tokens searched: the two cuts that need no search. */
static double search_bound(const flow_search *s)
{
    double out = 0, in = 0;
    for (size_t k = s->lo; k < s->hi; k++) {
        out += s->source_left[k];
        in += s->sink_left[k];
    }
    return out < in ? out : in;
}

/* The certificate, checked where assert is: a cut over the flow by at
 * most FLOW_EPSILON for each of the (L n + 1) n edges it may cross, and
 * rounding. */
#define FLOW_GAP_LIMIT(net) \
    (FLOW_EPSILON * (double)(((net)->layers * (net)->n + 1) * (net)->n) + 1e-12)

/* The maximum flow of pair (j, q) and the gap between it and its cut. */
static double search_pair(flow_search *s, size_t j, size_t q, double *gap)
{
    search_start(s, j, q);
    const double bound = search_bound(s);
    double cut = bound;
    s->phases++;
    search_wave(s);
    while (has_room(bound - s->value)) {
        s->phases++;
        if (!search_levels(s)) {
            cut = search_cut(s);
            break;
        }
        search_block(s);
    }
    *gap = fabs(cut - s->value);
    assert(*gap <= FLOW_GAP_LIMIT(s->net));
    return s->value;
}

/* Whether every layer is lower triangular: a token reaches only itself
 * and later positions, so flows to earlier ones are 0. */
static bool all_causal(size_t n, size_t layers, const double *a_hat)
{
    for (size_t l = 0; l < layers; l++)
        for (size_t q = 0; q < n; q++)
            for (size_t k = q + 1; k < n; k++)
                if (a_hat[(l * n + q) * n + k] != 0)
                    return false;
    return true;
}

/* through (L - 2, n, n): the inner layers transposed, a node's outgoing
 * capacities in one row (flow_net). */
static void transpose_inner(size_t n, size_t layers, const double *a_hat, double *through)
{
    for (size_t e = 0; e + 2 < layers; e++) {
        const double *layer = a_hat + (e + 1) * n * n;     /* (n, n) Â_(e+2) */
        for (size_t k = 0; k < n; k++)
            for (size_t q = 0; q < n; q++)
                through[(e * n + k) * n + q] = layer[q * n + k];
    }
}

/* Row q of flow (the flows into position q from every token), on one
 * thread's search. */
static void flow_row(flow_search *s, size_t q, double *row, attn_flow_report *mine)
{
    const size_t n = s->net->n;
    for (size_t j = 0; j < n; j++) {
        double gap = 0;
        if (s->net->causal && j > q) {
            row[j] = 0;
            continue;
        }
        row[j] = search_pair(s, j, q, &gap);
        mine->pairs++;
        if (gap > mine->gap)
            mine->gap = gap;
    }
}

/* One layer: each flow is the edge's capacity. */
static void flow_one_layer(size_t n, const double *a_hat, double *flow, attn_flow_report *report)
{
    memcpy(flow, a_hat, n * n * sizeof *flow);
    report->pairs = 0;
}

int attn_flow(size_t n, size_t layers, const double *a_hat, double *flow,
              attn_flow_report *report, attn_flow_progress progress, void *context)
{
    attn_flow_report total = {.causal = all_causal(n, layers, a_hat)};
    if (layers < 2 || n == 0) {
        if (layers == 1)
            flow_one_layer(n, a_hat, flow, &total);
        *report = total;
        return ATTN_OK;
    }
    double *through = attn_malloc((layers - 2) * n * n * sizeof(double));
    if (through == NULL)
        return ATTN_ENOMEM;
    transpose_inner(n, layers, a_hat, through);
    const flow_net net = {n, layers, a_hat, through, total.causal};
    size_t rows_done = 0;
    bool failed = false;
#pragma omp parallel num_threads(attn_threads())
    {
        flow_search s;
        attn_flow_report mine = {0};
        const bool ready = search_alloc(&net, &s);
#pragma omp for schedule(dynamic, 1)
        for (size_t q = 0; q < n; q++) {
            if (!ready)
                continue;
            flow_row(&s, q, flow + q * n, &mine);
            size_t done;
#pragma omp atomic capture
            done = ++rows_done;
            if (progress != NULL && omp_get_thread_num() == 0)
                progress(done, n, context);
        }
#pragma omp critical
        {
            failed |= !ready;
            total.pairs += mine.pairs;
            total.phases += s.phases;         /* 0 for a search that did not start */
            if (mine.gap > total.gap)
                total.gap = mine.gap;
        }
        search_free(&s);
    }
    free(through);
    *report = total;
    return failed ? ATTN_ENOMEM : ATTN_OK;
}
