/* Sampling over a step's logits rows in C: what numpy cannot do without touching the
   whole vocabulary several times, or without some thirty small calls per step.

   Per row (rows are read through an index array, in place in llama.cpp's logits matrix):
     1. the maximum of every block of 64 logits (one streaming read, at the widest vectors
        the CPU has: AVX-512, AVX2 or SSE, chosen at import);
     2. the repeat penalty and bans on the row's few window tokens, now in cache, and the
        maxima of their blocks recomputed;
     3. the k-th largest block maximum t: k blocks hold a value >= t, so the k-th largest
        logit is >= t (with fewer than k blocks, t = -inf); only blocks whose maximum is
        >= t are read again, four logits to a comparison, and their logits >= t (or, once
        the heap is full, >= its worst) offered to a heap of the k best. Order:
        descending value, ties by smaller token id (a stable argsort of -logits);
     4. (draw_rows) the rest of llama.cpp's chain on those k, in the order of its stages
        declared in inference/params.py (CHAIN; tests check this against llama.cpp's own
        chain): top-p on the softmax of the top-k set, min-p relative to the best token
        (cut in float32), temperature, and one draw with the caller's uniform; temperature
        <= 0 is the first maximum (greedy).
   The GIL is released while rows are worked on. draw_rows spreads a step's rows over
   OpenMP threads (at least 4 rows each): llama.cpp's own workers, idle between decodes,
   whose memory bandwidth the one full read of each row is bound by. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define BLOCK 64

static inline float fmax_(float a, float b) { return a > b ? a : b; }

/* The maximum of up to BLOCK logits, a > b ? a : b in order (a NaN may or may not pass). */
static float block_max(const float *p, int64_t n) {
    float m = p[0];
    for (int64_t j = 1; j < n; j++) m = fmax_(m, p[j]);
    return m;
}

/* ----- vector kernels: the block maxima pass and the candidate scan -------------------

   The maxima pass reads the whole row and is most of the kernel's time: it runs at the
   widest vectors the CPU has (chosen once, at import). maxps and its wider forms are
   exactly a > b ? a : b per lane. */

typedef void (*BlockMaxima)(const float *row, int64_t n_blocks, float *out);

static void block_maxima_scalar(const float *row, int64_t n_blocks, float *out) {
    for (int64_t b = 0; b < n_blocks; b++) out[b] = block_max(row + b * BLOCK, BLOCK);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1

static float reduce4(__m128 v) {
    float lane[4];
    _mm_storeu_ps(lane, v);
    return fmax_(fmax_(lane[0], lane[1]), fmax_(lane[2], lane[3]));
}

static void block_maxima_sse(const float *row, int64_t n_blocks, float *out) {
    for (int64_t b = 0; b < n_blocks; b++) {
        const float *p = row + b * BLOCK;
        __m128 a0 = _mm_loadu_ps(p), a1 = _mm_loadu_ps(p + 4), a2 = _mm_loadu_ps(p + 8), a3 = _mm_loadu_ps(p + 12);
        for (int j = 16; j < BLOCK; j += 16) {
            a0 = _mm_max_ps(a0, _mm_loadu_ps(p + j));
            a1 = _mm_max_ps(a1, _mm_loadu_ps(p + j + 4));
            a2 = _mm_max_ps(a2, _mm_loadu_ps(p + j + 8));
            a3 = _mm_max_ps(a3, _mm_loadu_ps(p + j + 12));
        }
        out[b] = reduce4(_mm_max_ps(_mm_max_ps(a0, a1), _mm_max_ps(a2, a3)));
    }
}

__attribute__((target("avx2"))) static void block_maxima_avx2(const float *row, int64_t n_blocks, float *out) {
    for (int64_t b = 0; b < n_blocks; b++) {
        const float *p = row + b * BLOCK;
        __m256 a0 = _mm256_max_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 32));
        __m256 a1 = _mm256_max_ps(_mm256_loadu_ps(p + 8), _mm256_loadu_ps(p + 40));
        __m256 a2 = _mm256_max_ps(_mm256_loadu_ps(p + 16), _mm256_loadu_ps(p + 48));
        __m256 a3 = _mm256_max_ps(_mm256_loadu_ps(p + 24), _mm256_loadu_ps(p + 56));
        __m256 m = _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3));
        out[b] = reduce4(_mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1)));
    }
}

__attribute__((target("avx512f"))) static void block_maxima_avx512(const float *row, int64_t n_blocks,
                                                                   float *out) {
    for (int64_t b = 0; b < n_blocks; b++) {
        const float *p = row + b * BLOCK;
        __m512 m = _mm512_max_ps(_mm512_max_ps(_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16)),
                                 _mm512_max_ps(_mm512_loadu_ps(p + 32), _mm512_loadu_ps(p + 48)));
        __m256 h = _mm256_max_ps(_mm512_castps512_ps256(m),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(m), 1)));
        out[b] = reduce4(_mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    }
}
#endif

static BlockMaxima block_maxima_full = block_maxima_scalar;

/* Chosen once, when the module loads: the widest the CPU has, or CHORUS_SAMPLING_VECTOR
   (scalar, sse, avx2, avx512f) where the CPU has that one (tests run every width). */
static const char *choose_vector_width(void) {
    const char *wanted = getenv("CHORUS_SAMPLING_VECTOR");
    if (wanted != NULL && strcmp(wanted, "scalar") == 0) return "scalar";
#ifdef HAVE_X86
    __builtin_cpu_init();
    int pick_any = wanted == NULL || *wanted == '\0';
    if (__builtin_cpu_supports("avx512f") && (pick_any || strcmp(wanted, "avx512f") == 0)) {
        block_maxima_full = block_maxima_avx512;
        return "avx512f";
    }
    if (__builtin_cpu_supports("avx2") && (pick_any || strcmp(wanted, "avx2") == 0)) {
        block_maxima_full = block_maxima_avx2;
        return "avx2";
    }
    block_maxima_full = block_maxima_sse;
    return "sse";
#else
    return "scalar";
#endif
}

/* A bitmask of the lanes of p[0..4) that are >= bound (a NaN never is). */
static inline unsigned at_least4(const float *p, float bound) {
#ifdef HAVE_X86
    return (unsigned)_mm_movemask_ps(_mm_cmpge_ps(_mm_loadu_ps(p), _mm_set1_ps(bound)));
#else
    return (unsigned)(p[0] >= bound) | (unsigned)(p[1] >= bound) << 1 | (unsigned)(p[2] >= bound) << 2 |
           (unsigned)(p[3] >= bound) << 3;
#endif
}

/* A bounded min-heap of (value, id): the root is the worst kept entry. */
typedef struct {
    float *value;
    int32_t *id;
    int size;
    int capacity;
} Heap;

static inline int worse(float va, int32_t ia, float vb, int32_t ib) {
    return va < vb || (va == vb && ia > ib);
}

static inline void heap_swap(Heap *h, int a, int b) {
    float v = h->value[a];
    int32_t i = h->id[a];
    h->value[a] = h->value[b];
    h->id[a] = h->id[b];
    h->value[b] = v;
    h->id[b] = i;
}

static void sift_down(Heap *h, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->size && worse(h->value[l], h->id[l], h->value[m], h->id[m])) m = l;
        if (r < h->size && worse(h->value[r], h->id[r], h->value[m], h->id[m])) m = r;
        if (m == i) return;
        heap_swap(h, i, m);
        i = m;
    }
}

/* A min-heap of values only (kth_largest): the hole moves down, the value is written once. */
static void sift_down_values(float *heap, int size, int i) {
    float v = heap[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= size) break;
        if (c + 1 < size && heap[c + 1] < heap[c]) c++;
        if (!(heap[c] < v)) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = v;
}

static inline void heap_offer(Heap *h, float value, int32_t id) {
    if (h->size < h->capacity) {
        int i = h->size++;
        h->value[i] = value;
        h->id[i] = id;
        while (i > 0) {
            int p = (i - 1) / 2;
            if (!worse(h->value[i], h->id[i], h->value[p], h->id[p])) break;
            heap_swap(h, i, p);
            i = p;
        }
    } else if (worse(h->value[0], h->id[0], value, id)) {
        h->value[0] = value;
        h->id[0] = id;
        sift_down(h, 0);
    }
}

/* One logit changed; with block_maxima, its block's maximum kept true (recomputed only
   when the maximum itself went down). */
static void set_logit(float *row, int64_t n_vocab, int64_t token, float value, float *block_maxima) {
    float old = row[token];
    row[token] = value;
    if (block_maxima == NULL) return;
    float *maximum = &block_maxima[token / BLOCK];
    if (value > *maximum) {
        *maximum = value; /* a penalty below 1 raises a logit */
    } else if (old == *maximum && value != old) { /* the block's maximum went down: find the new one */
        int64_t start = token / BLOCK * BLOCK;
        *maximum = block_max(row + start, n_vocab - start < BLOCK ? n_vocab - start : BLOCK);
    }
}

/* Bans (-inf), then llama.cpp's repeat penalty (logit <= 0: times the penalty, else
   divided by it, in float32) on each window token once, however often it occurs: every
   value is read before any is written, so a repeated token gets the same result twice. */
static void penalise_row(float *row, int64_t n_vocab, const int64_t *window, int64_t n_window, float penalty,
                         const int64_t *bans, int64_t n_bans, float *scratch, float *block_maxima) {
    for (int64_t i = 0; i < n_bans; i++) set_logit(row, n_vocab, bans[i], -INFINITY, block_maxima);
    if (penalty == 1.0f) return;
    for (int64_t i = 0; i < n_window; i++) scratch[i] = row[window[i]];
    for (int64_t i = 0; i < n_window; i++) {
        float x = scratch[i];
        set_logit(row, n_vocab, window[i], x <= 0.0f ? x * penalty : x / penalty, block_maxima);
    }
}

static void block_maxima_of(const float *row, int64_t n_vocab, float *block_maxima) {
    int64_t n_full = n_vocab / BLOCK;
    block_maxima_full(row, n_full, block_maxima);
    if (n_vocab % BLOCK) block_maxima[n_full] = block_max(row + n_full * BLOCK, n_vocab % BLOCK);
}

/* The k-th largest of n values (1 <= k <= n), with a min-heap of the k largest so far in
   scratch: most values fail the one comparison with its root. */
static float kth_largest(const float *values, int64_t n, int k, float *heap) {
    memcpy(heap, values, sizeof(float) * (size_t)k);
    for (int i = k / 2 - 1; i >= 0; i--) sift_down_values(heap, k, i);
    for (int64_t i = k; i < n; i++) {
        if (values[i] > heap[0]) {
            heap[0] = values[i];
            sift_down_values(heap, k, 0);
        }
    }
    return heap[0];
}

/* Offer row[start..end) to the heap, four logits at a time: only those at or above the
   bound (t, or once the heap is full its worst entry) are offered. */
static void offer_block(Heap *heap, const float *row, int64_t start, int64_t end, float threshold) {
    int64_t j = start;
    for (; j + 4 <= end; j += 4) {
        float bound = heap->size == heap->capacity ? heap->value[0] : threshold;
        for (unsigned mask = at_least4(row + j, bound); mask; mask &= mask - 1) {
            int64_t id = j + __builtin_ctz(mask);
            heap_offer(heap, row[id], (int32_t)id);
        }
    }
    for (; j < end; j++) {
        if (row[j] >= threshold) heap_offer(heap, row[j], (int32_t)j);
    }
}

/* The k best of row into out_ids/out_values (descending), given its block maxima; the
   slots from k to width get -1 and -inf. Returns how many it found (min(k, n_vocab)). */
static int top_k_row(const float *row, int64_t n_vocab, int k, const float *block_maxima, Heap *heap,
                     int32_t *out_ids, float *out_values, int64_t width) {
    int64_t n_blocks = (n_vocab + BLOCK - 1) / BLOCK;
    heap->capacity = k;
    heap->size = 0;
    /* k blocks hold a logit >= the k-th largest block maximum: so does the k-th best. */
    float threshold = k > 0 && n_blocks >= k ? kth_largest(block_maxima, n_blocks, k, heap->value) : -INFINITY;
    for (int64_t b = 0; b < n_blocks && k > 0; b++) {
        if (block_maxima[b] < threshold) continue;
        offer_block(heap, row, b * BLOCK, (b + 1) * BLOCK < n_vocab ? (b + 1) * BLOCK : n_vocab, threshold);
    }
    int n = heap->size;
    for (int m = n; m > 0; m--) { /* pop the worst to the back: descending order */
        out_ids[m - 1] = heap->id[0];
        out_values[m - 1] = heap->value[0];
        heap->value[0] = heap->value[heap->size - 1];
        heap->id[0] = heap->id[heap->size - 1];
        heap->size--;
        sift_down(heap, 0);
    }
    for (int64_t m = n; m < width; m++) {
        out_ids[m] = -1;
        out_values[m] = -INFINITY;
    }
    return n;
}

/* llama.cpp's chain after top-k, on the n best (descending): top-p over the softmax of
   those n, min-p against the best, temperature, then the first token whose running mass
   exceeds uniform * the kept mass. Returns the chosen index into values. */
static int draw_from_top(const float *values, int n, double top_p, float log_min_p, double temperature,
                         double uniform, double *scratch) {
    if (n <= 1 || temperature <= 0.0) return 0;
    float best = values[0];
    double z = 0.0;
    for (int j = 0; j < n; j++) {
        scratch[j] = exp(-(double)(best - values[j]));
        z += scratch[j];
    }
    double before = 0.0, kept_mass = 0.0;
    int kept = 0;
    for (; kept < n; kept++) { /* the kept set is a prefix: top-p and min-p both cut a tail */
        if (!(before < top_p * z) || !(values[kept] >= best + log_min_p)) break;
        before += scratch[kept];
        scratch[kept] = exp(-(double)(best - values[kept]) / temperature);
        kept_mass += scratch[kept];
    }
    if (kept == 0) kept = 1; /* unreachable (the best always passes), kept for safety */
    double target = uniform * kept_mass, running = 0.0;
    for (int j = 0; j < kept; j++) {
        running += scratch[j];
        if (running > target) return j;
    }
    return kept - 1; /* uniform * mass rounded up to the whole mass */
}

/* ----- the Python side: buffer checks, then the rows without the GIL ------------------ */

typedef enum { F32, F64, I32, I64 } Kind;

static const char *kind_name(Kind kind) {
    return kind == F32 ? "float32" : kind == F64 ? "float64" : kind == I32 ? "int32" : "int64";
}

static int get_array(PyObject *obj, Py_buffer *view, int writable, int ndim, Kind kind, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
    const char *format = view->format ? view->format : "B";
    if (*format == '<' || *format == '=' || *format == '@') format++;
    char f = format[1] == '\0' ? format[0] : '?';
    int ok = kind == F32   ? f == 'f' && view->itemsize == 4
             : kind == F64 ? f == 'd' && view->itemsize == 8
             : kind == I32 ? (f == 'i' || f == 'l') && view->itemsize == 4
                           : (f == 'l' || f == 'q') && view->itemsize == 8;
    if (view->ndim != ndim || !ok) {
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous %d-D %s array", name, ndim, kind_name(kind));
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

typedef struct {
    PyObject *object;
    Py_buffer view;
    int writable, ndim;
    Kind kind;
    const char *name;
    int held;
} Arg;

static int get_args(Arg *args, int n) {
    for (int i = 0; i < n; i++) {
        if (get_array(args[i].object, &args[i].view, args[i].writable, args[i].ndim, args[i].kind, args[i].name) < 0)
            return -1;
        args[i].held = 1;
    }
    return 0;
}

static void release_args(Arg *args, int n) {
    for (int i = 0; i < n; i++) {
        if (args[i].held) PyBuffer_Release(&args[i].view);
    }
}

static Py_ssize_t rows_of(const Arg *arg) { return arg->view.shape[0]; }

/* Row indices inside the logits matrix, and a vocabulary that int32 ids can name. */
static int check_rows(const Arg *logits, const Arg *rows) {
    Py_ssize_t n_logit_rows = logits->view.shape[0], n_vocab = logits->view.shape[1];
    if (n_vocab < 1 || n_vocab > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "the vocabulary must hold 1 to 2**31-1 tokens");
        return -1;
    }
    const int32_t *index = rows->view.buf;
    for (Py_ssize_t r = 0; r < rows_of(rows); r++) {
        if (index[r] < 0 || index[r] >= n_logit_rows) {
            PyErr_Format(PyExc_IndexError, "row %d is outside the %zd logits rows", index[r], n_logit_rows);
            return -1;
        }
    }
    return 0;
}

/* tokens[ends[r-1]:ends[r]] belong to row r: ends rise, end within tokens, ids in the vocabulary. */
static int check_ragged(const Arg *tokens, const Arg *ends, Py_ssize_t n_rows, int64_t n_vocab, const char *name) {
    if (rows_of(ends) != n_rows) {
        PyErr_Format(PyExc_ValueError, "%s_ends must have one entry per row", name);
        return -1;
    }
    const int64_t *end = ends->view.buf, *token = tokens->view.buf;
    int64_t previous = 0;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        if (end[r] < previous || end[r] > rows_of(tokens)) {
            PyErr_Format(PyExc_ValueError, "%s_ends must rise and stay within %s", name, name);
            return -1;
        }
        previous = end[r];
    }
    for (Py_ssize_t i = 0; i < rows_of(tokens); i++) {
        if (token[i] < 0 || token[i] >= n_vocab) {
            PyErr_Format(PyExc_IndexError, "token %lld in %s is outside the vocabulary", (long long)token[i], name);
            return -1;
        }
    }
    return 0;
}

static int64_t longest_span(const Arg *ends, Py_ssize_t n_rows) {
    const int64_t *end = ends->view.buf;
    int64_t longest = 0, previous = 0;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        if (end[r] - previous > longest) longest = end[r] - previous;
        previous = end[r];
    }
    return longest;
}

/* Scratch memory for one call: block maxima, the heap, a row's top values and ids, the
   penalty's gathered values, the draw's weights. */
typedef struct {
    float *block_maxima, *heap_values, *top_values, *gathered;
    int32_t *heap_ids, *top_ids;
    double *weights;
} Scratch;

static void free_scratch(Scratch *s) {
    free(s->block_maxima);
    free(s->heap_values);
    free(s->top_values);
    free(s->gathered);
    free(s->heap_ids);
    free(s->top_ids);
    free(s->weights);
}

static int alloc_scratch(Scratch *s, int64_t n_vocab, int64_t width, int64_t window) {
    int64_t n_blocks = (n_vocab + BLOCK - 1) / BLOCK;
    size_t heap_room = (size_t)(width > n_blocks ? width : n_blocks) + 1;
    s->block_maxima = malloc(sizeof(float) * (size_t)n_blocks);
    s->heap_values = malloc(sizeof(float) * heap_room);
    s->heap_ids = malloc(sizeof(int32_t) * heap_room);
    s->top_values = malloc(sizeof(float) * (size_t)(width + 1));
    s->top_ids = malloc(sizeof(int32_t) * (size_t)(width + 1));
    s->weights = malloc(sizeof(double) * (size_t)(width + 1));
    s->gathered = malloc(sizeof(float) * (size_t)(window + 1));
    if (!s->block_maxima || !s->heap_values || !s->heap_ids || !s->top_values || !s->top_ids || !s->weights ||
        !s->gathered) {
        free_scratch(s);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static PyObject *top_k_rows(PyObject *Py_UNUSED(self), PyObject *args) {
    Arg a[5] = {
        {.writable = 0, .ndim = 2, .kind = F32, .name = "logits"},
        {.writable = 0, .ndim = 1, .kind = I32, .name = "rows"},
        {.writable = 0, .ndim = 1, .kind = I32, .name = "ks"},
        {.writable = 1, .ndim = 2, .kind = I32, .name = "ids"},
        {.writable = 1, .ndim = 2, .kind = F32, .name = "values"},
    };
    if (!PyArg_ParseTuple(args, "OOOOO:top_k_rows", &a[0].object, &a[1].object, &a[2].object, &a[3].object,
                          &a[4].object))
        return NULL;
    PyObject *result = NULL;
    Scratch scratch = {0};
    if (get_args(a, 5) < 0 || check_rows(&a[0], &a[1]) < 0) goto done;
    Py_ssize_t n_rows = rows_of(&a[1]), width = a[3].view.shape[1], n_vocab = a[0].view.shape[1];
    if (rows_of(&a[2]) != n_rows || rows_of(&a[3]) != n_rows || rows_of(&a[4]) != n_rows ||
        a[4].view.shape[1] != width || width > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "rows, ks, ids and values must agree in rows, ids and values in width");
        goto done;
    }
    if (alloc_scratch(&scratch, n_vocab, width, 0) < 0) goto done;
    const int32_t *index = a[1].view.buf, *k_of = a[2].view.buf;
    Py_BEGIN_ALLOW_THREADS
    Heap heap = {scratch.heap_values, scratch.heap_ids, 0, 0};
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        int64_t k = k_of[r] < 0 ? 0 : k_of[r];
        if (k > width) k = width;
        if (k > n_vocab) k = n_vocab;
        const float *row = (const float *)a[0].view.buf + (int64_t)index[r] * n_vocab;
        block_maxima_of(row, n_vocab, scratch.block_maxima);
        top_k_row(row, n_vocab, (int)k, scratch.block_maxima, &heap, (int32_t *)a[3].view.buf + r * width,
                  (float *)a[4].view.buf + r * width, width);
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free_scratch(&scratch);
    release_args(a, 5);
    return result;
}

/* The penalty arguments shared by penalise_rows and draw_rows. */
#define PENALTY_ARGS                                                                 \
    {.writable = 0, .ndim = 1, .kind = I64, .name = "windows"},                      \
    {.writable = 0, .ndim = 1, .kind = I64, .name = "window_ends"},                  \
    {.writable = 0, .ndim = 1, .kind = F32, .name = "penalties"},                    \
    {.writable = 0, .ndim = 1, .kind = I64, .name = "bans"},                         \
    {.writable = 0, .ndim = 1, .kind = I64, .name = "ban_ends"}

static int check_penalties(const Arg *p, Py_ssize_t n_rows, int64_t n_vocab) {
    if (rows_of(&p[2]) != n_rows) {
        PyErr_SetString(PyExc_ValueError, "penalties must have one entry per row");
        return -1;
    }
    if (check_ragged(&p[0], &p[1], n_rows, n_vocab, "windows") < 0) return -1;
    return check_ragged(&p[3], &p[4], n_rows, n_vocab, "bans");
}

static void penalise_nth(float *row, int64_t n_vocab, const Arg *p, Py_ssize_t r, float *gathered,
                         float *block_maxima) {
    const int64_t *w_end = p[1].view.buf, *b_end = p[4].view.buf;
    int64_t w0 = r ? w_end[r - 1] : 0, b0 = r ? b_end[r - 1] : 0;
    penalise_row(row, n_vocab, (const int64_t *)p[0].view.buf + w0, w_end[r] - w0, ((const float *)p[2].view.buf)[r],
                 (const int64_t *)p[3].view.buf + b0, b_end[r] - b0, gathered, block_maxima);
}

static PyObject *penalise_rows(PyObject *Py_UNUSED(self), PyObject *args) {
    Arg a[7] = {
        {.writable = 1, .ndim = 2, .kind = F32, .name = "logits"},
        {.writable = 0, .ndim = 1, .kind = I32, .name = "rows"},
        PENALTY_ARGS,
    };
    if (!PyArg_ParseTuple(args, "OOOOOOO:penalise_rows", &a[0].object, &a[1].object, &a[2].object, &a[3].object,
                          &a[4].object, &a[5].object, &a[6].object))
        return NULL;
    PyObject *result = NULL;
    Scratch scratch = {0};
    if (get_args(a, 7) < 0 || check_rows(&a[0], &a[1]) < 0) goto done;
    Py_ssize_t n_rows = rows_of(&a[1]), n_vocab = a[0].view.shape[1];
    if (check_penalties(&a[2], n_rows, n_vocab) < 0) goto done;
    if (alloc_scratch(&scratch, n_vocab, 0, longest_span(&a[3], n_rows)) < 0) goto done;
    const int32_t *index = a[1].view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        float *row = (float *)a[0].view.buf + (int64_t)index[r] * n_vocab;
        penalise_nth(row, n_vocab, &a[2], r, scratch.gathered, NULL);
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free_scratch(&scratch);
    release_args(a, 7);
    return result;
}

/* ----- draw_rows: the rows, on one thread or on OpenMP's ------------------------------ */

/* Fewer rows a thread than this: one thread (waking another costs more than it saves). */
#define MIN_ROWS_PER_THREAD 4

/* The threads for n rows: reading a step's logits (1.5 MB at 8 rows of 49k) is bound by one
   core's memory bandwidth; llama.cpp's OpenMP workers, idle between decodes, add theirs. */
static int threads_for(Py_ssize_t n_rows) {
#ifdef _OPENMP
    Py_ssize_t most = n_rows / MIN_ROWS_PER_THREAD, have = omp_get_max_threads();
    Py_ssize_t n = most < have ? most : have;
    return n > 1 ? (int)n : 1;
#else
    (void)n_rows;
    return 1;
#endif
}

static inline int thread_number(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Everything one row's draw reads, checked by draw_rows before any thread starts. */
typedef struct {
    float *logits;
    int64_t n_vocab;
    const int32_t *index, *k_of;
    int64_t width; /* the largest k */
    const double *settings;
    const float *penalties;
    const int64_t *bans, *ban_end;
    const int64_t *rings; /* written only after every row drew */
    int64_t ring_width;
    const int64_t *ring_size, *ring_count;
    const double *uniforms;
    int64_t n_uniforms;
    const int32_t *cursor;
    int32_t *tokens;
} DrawJob;

/* Row r: bans and penalties in place, its top k, the chain and the draw; its token, or -1
   when no logit is finite. Rows share nothing but read-only inputs: any thread, any order. */
static int32_t draw_row(const DrawJob *job, Py_ssize_t r, Scratch *sc) {
    int64_t n_vocab = job->n_vocab;
    float *row = job->logits + (int64_t)job->index[r] * n_vocab;
    int64_t b0 = r ? job->ban_end[r - 1] : 0;
    int64_t used = job->ring_count[r] < job->ring_size[r] ? job->ring_count[r] : job->ring_size[r];
    block_maxima_of(row, n_vocab, sc->block_maxima);
    penalise_row(row, n_vocab, job->rings + r * job->ring_width, used, job->penalties[r], job->bans + b0,
                 job->ban_end[r] - b0, sc->gathered, sc->block_maxima);
    Heap heap = {sc->heap_values, sc->heap_ids, 0, 0};
    int k = (int)(job->k_of[r] < job->width ? job->k_of[r] : job->width);
    int n = top_k_row(row, n_vocab, k, sc->block_maxima, &heap, sc->top_ids, sc->top_values, k);
    const double *s = job->settings + 3 * r; /* top_p, log(min_p), temperature */
    double uniform = s[2] > 0.0 ? job->uniforms[r * job->n_uniforms + job->cursor[r]] : 0.0;
    /* No finite best (the row is NaN, or all banned): nothing to draw. */
    int32_t token = n && sc->top_values[0] > -INFINITY
                        ? sc->top_ids[draw_from_top(sc->top_values, n, s[0], (float)s[1], s[2], uniform, sc->weights)]
                        : -1;
    job->tokens[r] = token;
    return token;
}

/* A row's penalty window lives in rings[r]: its first min(count, size) entries (a ring of
   size entries, the next token at count % size). */
static int check_rings(const Arg *rings, const Arg *sizes, const Arg *counts, Py_ssize_t n_rows, int64_t n_vocab) {
    if (rows_of(rings) != n_rows || rows_of(sizes) != n_rows || rows_of(counts) != n_rows) {
        PyErr_SetString(PyExc_ValueError, "rings, ring_sizes and ring_counts must have one row per row");
        return -1;
    }
    int64_t width = rings->view.shape[1];
    const int64_t *size = sizes->view.buf, *count = counts->view.buf, *token = rings->view.buf;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        if (size[r] < 0 || size[r] > width || count[r] < 0) {
            PyErr_Format(PyExc_ValueError, "row %zd's ring (size %lld, count %lld) does not fit rings of width %lld",
                         r, (long long)size[r], (long long)count[r], (long long)width);
            return -1;
        }
        int64_t used = count[r] < size[r] ? count[r] : size[r];
        for (int64_t i = 0; i < used; i++) {
            if (token[r * width + i] < 0 || token[r * width + i] >= n_vocab) {
                PyErr_Format(PyExc_IndexError, "token %lld in row %zd's ring is outside the vocabulary",
                             (long long)token[r * width + i], r);
                return -1;
            }
        }
    }
    return 0;
}

/* Every row that draws (temperature > 0) has an unused uniform. */
static int check_uniforms(const Arg *uniforms, const Arg *cursors, const double *settings, Py_ssize_t n_rows) {
    if (rows_of(uniforms) != n_rows || rows_of(cursors) != n_rows) {
        PyErr_SetString(PyExc_ValueError, "uniforms and cursors must have one row per row");
        return -1;
    }
    const int32_t *cursor = cursors->view.buf;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        if (settings[3 * r + 2] > 0.0 && (cursor[r] < 0 || cursor[r] >= uniforms->view.shape[1])) {
            PyErr_Format(PyExc_ValueError, "row %zd has no unused uniform (cursor %d)", r, cursor[r]);
            return -1;
        }
    }
    return 0;
}

static PyObject *draw_rows(PyObject *Py_UNUSED(self), PyObject *args) {
    Arg a[13] = {
        {.writable = 1, .ndim = 2, .kind = F32, .name = "logits"},
        {.writable = 0, .ndim = 1, .kind = I32, .name = "rows"},
        {.writable = 0, .ndim = 1, .kind = I32, .name = "ks"},
        {.writable = 0, .ndim = 2, .kind = F64, .name = "settings"},
        {.writable = 0, .ndim = 1, .kind = F32, .name = "penalties"},
        {.writable = 0, .ndim = 1, .kind = I64, .name = "bans"},
        {.writable = 0, .ndim = 1, .kind = I64, .name = "ban_ends"},
        {.writable = 1, .ndim = 2, .kind = I64, .name = "rings"},
        {.writable = 0, .ndim = 1, .kind = I64, .name = "ring_sizes"},
        {.writable = 1, .ndim = 1, .kind = I64, .name = "ring_counts"},
        {.writable = 0, .ndim = 2, .kind = F64, .name = "uniforms"},
        {.writable = 1, .ndim = 1, .kind = I32, .name = "cursors"},
        {.writable = 1, .ndim = 1, .kind = I32, .name = "tokens"},
    };
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOO:draw_rows", &a[0].object, &a[1].object, &a[2].object, &a[3].object,
                          &a[4].object, &a[5].object, &a[6].object, &a[7].object, &a[8].object, &a[9].object,
                          &a[10].object, &a[11].object, &a[12].object))
        return NULL;
    PyObject *result = NULL;
    Scratch *per_thread = NULL; /* one scratch a thread */
    int n_threads = 0;
    if (get_args(a, 13) < 0 || check_rows(&a[0], &a[1]) < 0) goto done;
    Py_ssize_t n_rows = rows_of(&a[1]), n_vocab = a[0].view.shape[1];
    if (rows_of(&a[2]) != n_rows || rows_of(&a[3]) != n_rows || a[3].view.shape[1] != 3 || rows_of(&a[4]) != n_rows ||
        rows_of(&a[12]) != n_rows) {
        PyErr_SetString(PyExc_ValueError, "ks, settings (rows x 3), penalties and tokens must have one row per row");
        goto done;
    }
    const double *settings = a[3].view.buf;
    if (check_ragged(&a[5], &a[6], n_rows, n_vocab, "bans") < 0 || check_rings(&a[7], &a[8], &a[9], n_rows, n_vocab) < 0 ||
        check_uniforms(&a[10], &a[11], settings, n_rows) < 0)
        goto done;
    const int32_t *index = a[1].view.buf, *k_of = a[2].view.buf;
    int64_t width = 1;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        if (k_of[r] < 1) {
            PyErr_SetString(PyExc_ValueError, "every row's k must be at least 1");
            goto done;
        }
        if (k_of[r] > width) width = k_of[r];
    }
    if (width > n_vocab) width = n_vocab;
    int64_t ring_width = a[7].view.shape[1];
    DrawJob job = {
        .logits = a[0].view.buf, .n_vocab = n_vocab, .index = index, .k_of = k_of, .width = width,
        .settings = settings, .penalties = a[4].view.buf, .bans = a[5].view.buf, .ban_end = a[6].view.buf,
        .rings = a[7].view.buf, .ring_width = ring_width, .ring_size = a[8].view.buf, .ring_count = a[9].view.buf,
        .uniforms = a[10].view.buf, .n_uniforms = a[10].view.shape[1], .cursor = a[11].view.buf,
        .tokens = a[12].view.buf,
    };
    int wanted = threads_for(n_rows);
    per_thread = calloc((size_t)wanted, sizeof *per_thread);
    if (per_thread == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    n_threads = wanted;
    for (int t = 0; t < n_threads; t++) {
        if (alloc_scratch(&per_thread[t], n_vocab, width, ring_width) < 0) goto done;
    }
    const int64_t *ring_size = a[8].view.buf;
    int64_t *rings = a[7].view.buf, *ring_count = a[9].view.buf, n_uniforms = a[10].view.shape[1];
    int32_t *cursor = a[11].view.buf, *tokens = a[12].view.buf;
    Py_ssize_t undrawn = 0, exhausted = 0;
    Py_BEGIN_ALLOW_THREADS
#ifdef _OPENMP
#pragma omp parallel for num_threads(n_threads) schedule(static) reduction(+ : undrawn) if (n_threads > 1)
#endif
    for (Py_ssize_t r = 0; r < n_rows; r++) undrawn += draw_row(&job, r, &per_thread[thread_number()]) < 0;
    /* Every row drew: each accepts its token (the window takes it, the uniform is used). */
    for (Py_ssize_t r = 0; r < n_rows && undrawn == 0; r++) {
        if (ring_size[r] > 0) rings[r * ring_width + ring_count[r] % ring_size[r]] = tokens[r];
        ring_count[r]++;
        if (settings[3 * r + 2] > 0.0) exhausted += ++cursor[r] == n_uniforms;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(nn)", undrawn, exhausted);
done:
    for (int t = 0; t < n_threads; t++) free_scratch(&per_thread[t]); /* calloc'd: a scratch not reached is NULLs */
    free(per_thread);
    release_args(a, 13);
    return result;
}

static PyMethodDef methods[] = {
    {"top_k_rows", top_k_rows, METH_VARARGS,
     "top_k_rows(logits, rows, ks, ids, values): for each i, the ks[i] largest logits of row rows[i] "
     "(descending, ties by smaller id) into ids[i] and values[i]; the rest of each row -1 and -inf."},
    {"penalise_rows", penalise_rows, METH_VARARGS,
     "penalise_rows(logits, rows, windows, window_ends, penalties, bans, ban_ends): bans, then repeat "
     "penalties, in place, on each listed row."},
    {"draw_rows", draw_rows, METH_VARARGS,
     "draw_rows(logits, rows, ks, settings, penalties, bans, ban_ends, rings, ring_sizes, ring_counts, uniforms, "
     "cursors, tokens): bans and penalties (each row's ring), top-k, top-p, min-p, temperature and one draw per "
     "row; tokens[i] = -1 where no logit is finite. When every row drew, each ring takes its token and each "
     "drawing row's cursor moves on. Returns (rows that drew no token, rows whose uniforms ran out)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernel", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kernel(void) {
    const char *width = choose_vector_width();
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "VECTOR_WIDTH", width) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
