/* forward.c - libattn on plain buffers: two heads of causal self-attention
 * over three tokens, in float64.  Prints the weights (H, n, n), one query
 * per line, then the output (n, D).  Build against the installed library:
 *     cc forward.c $(pkg-config --cflags --libs attn) -o forward */
#include <attn/attn_math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 3, D = 4, H = 2, DK = 2 };   /* tokens, d_model, heads, d_k = d_v */

static void fill(double *values, int count, int k)   /* ((i k) mod 9 - 4) / 4 */
{
    for (int i = 0; i < count; i++)
        values[i] = ((i * k) % 9 - 4) / 4.0;
}

int main(void)
{
    double x[N * D], wq[D * H * DK], wk[D * H * DK], wv[D * H * DK], wo[H * DK * D];
    fill(x, N * D, 1), fill(wq, D * H * DK, 2), fill(wk, D * H * DK, 4);
    fill(wv, D * H * DK, 5), fill(wo, H * DK * D, 7);
    const attn_weights w = {.w_q = wq, .w_k = wk, .w_v = wv, .w_o = wo};   /* x W, no biases */
    const attn_config cfg = {.dims = {.batch = 1, .n = N, .m = N, .d_model = D, .heads = H,
                                      .d_k = DK, .d_v = DK}, .precision = ATTN_F64,
                             .variant = {.scale = 0.70710678118654752 /* 1/sqrt(dk) */, .causal = 1}};
    double q[N * H * DK], k[N * H * DK], v[N * H * DK], concat[N * H * DK];   /* (n, H dk) */
    double scores[H * N * N], weights[H * N * N], heads[H * N * DK], output[N * D];
    size_t scratch = (attn_attend_scratch_bytes(&cfg, 1, false) + 63) / 64 * 64;
    attn_slice s = {.count = 1, .x = x, .y = x, .q = q, .k = k, .v = v, .scores = scores,
                    .weights = weights, .heads = heads, .concat = concat, .output = output,
                    .scratch = aligned_alloc(64, scratch)};
    if (s.scratch == NULL)
        return 1;
    attn_forward(&cfg, &w, &s);
    for (int i = 0; i < H * N * N; i++)                /* weights (H, n, n) */
        printf("%.9f%c", weights[i], i % N == N - 1 ? '\n' : ' ');
    for (int i = 0; i < N * D; i++)                    /* output (n, D) */
        printf("%.9f%c", output[i], i % D == D - 1 ? '\n' : ' ');
    free(s.scratch);
}
