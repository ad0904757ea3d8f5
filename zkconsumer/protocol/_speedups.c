/*
 * zkconsumer.protocol._speedups: the compiled message-set walk (optional accelerator).
 *
 * Job: the per-message hot loop of `zkconsumer.protocol.messageset.decode_message_set`
 * (and of its batch form, `decode_batch`): walk the shallow entries, check every CRC, expand
 * compressed wrappers (decompression itself is a call back into the Python codec, which owns
 * gzip/snappy framing and the max_inflated bound), and produce exactly the same messages,
 * offsets, valid_bytes and typed errors (class, text and .offset) as the pure-Python path.
 * The pure path stays the reference: tests/unit/protocol runs every codec test against both.
 *
 * Invariants (hostile bytes must never crash the process):
 *   - every read is preceded by a bounds check against the buffer length; lengths are
 *     signed int32 on the wire and all arithmetic on positions is done in int64 after a
 *     sign check, so nothing overflows (a buffer is < 2**63 bytes);
 *   - a partial tail at top level stops the walk (reported through valid_bytes); inside a
 *     decompressed set it is corruption; nesting deeper than MAX_NESTING is refused;
 *   - decompression is bounded by the callback (max_size) and the budget is carried across
 *     nested wrappers exactly as the Python code does;
 *   - the GIL is held throughout (we create Python objects on every message), so the input
 *     buffer cannot change under us: callers pass an immutable bytes object.
 *
 * Plain CPython C API (no Cython): the loop is ~100 lines, there is no build dependency
 * beyond a C compiler and zlib's headers, and docs/protocol.md explains the choice.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define API_VERSION 3
#define MAX_NESTING 4

static PyObject *InvalidMessageSizeError;
static PyObject *UnknownMagicError;
static PyObject *CorruptMessageError;
static PyObject *CompressionError;

static inline int32_t be32s(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                     ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static inline uint32_t be32u(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
           (uint32_t)p[3];
}

/*
 * CRC32 (IEEE, what zlib.crc32 computes).  zlib 1.2's crc32 is about half the cost of a
 * 100-byte message (measured with perf), so on x86-64 CPUs with PCLMULQDQ the bulk of each
 * payload is folded 64 bytes at a time with carry-less multiplies -- the algorithm of Intel's
 * "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ" white paper, as in zlib-ng
 * and Chromium's zlib -- and the last < 16 bytes (and payloads < 64 bytes) go to zlib.
 * tests/unit/protocol/test_proto_speedups.py checks it against zlib.crc32 at every length
 * up to 600 bytes and at random offsets.
 */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_CLMUL 1
#include <immintrin.h>

static int use_clmul;

/* ~crc of p[0:n] given ~crc in; n >= 64 and a multiple of 16. */
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc_fold(const unsigned char *p, int64_t n, uint32_t crc)
{
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8;

    x1 = _mm_loadu_si128((const __m128i *)(p + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(p + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(p + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(p + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    x0 = k1k2;
    p += 64;
    n -= 64;
    while (n >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), _mm_loadu_si128((const __m128i *)(p + 0x00)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), _mm_loadu_si128((const __m128i *)(p + 0x10)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), _mm_loadu_si128((const __m128i *)(p + 0x20)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), _mm_loadu_si128((const __m128i *)(p + 0x30)));
        p += 64;
        n -= 64;
    }
    /* Fold the four lanes into one. */
    x0 = k3k4;
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
    /* Single folds of 16 bytes. */
    while (n >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)p);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        p += 16;
        n -= 16;
    }
    /* 128 -> 64 bits. */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    x0 = k5k0;
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    /* Barrett reduction to 32 bits. */
    x0 = poly;
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

/* Byte-at-a-time table for the < 16-byte tail after folding (a call into zlib costs more). */
static uint32_t crc_table[256];

static void crc_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static inline uint32_t crc_of(const unsigned char *p, int64_t n)
{
#ifdef HAVE_CLMUL
    if (use_clmul && n >= 64) {
        int64_t bulk = n & ~(int64_t)15;
        uint32_t c = crc_fold(p, bulk, 0xFFFFFFFFu);   /* pre/post-inverted, like the table */
        for (int64_t i = bulk; i < n; i++)
            c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
        return ~c;
    }
#endif
    /* n < 2**31 (an int32 length framed it), so it fits zlib's uInt. */
    return (uint32_t)crc32(0L, p, (uInt)n);
}

static PyObject *py_crc32(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc = crc_of((const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* Raise cls(message, offset): DecodeError.__init__ appends " (at byte offset N)". */
static void raise_at(PyObject *cls, long long offset, const char *format, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, format);
    PyOS_vsnprintf(text, sizeof text, format, ap);
    va_end(ap);
    PyObject *exc = PyObject_CallFunction(cls, "sL", text, offset);
    if (exc != NULL) {
        PyErr_SetObject(cls, exc);
        Py_DECREF(exc);
    }
}

/* One checked shallow entry (messageset.read_shallow). */
typedef struct {
    int64_t end;           /* position just past the entry */
    int magic;
    int attributes;
    int64_t payload;       /* position of the payload */
} entry_t;

enum { ENTRY_OK = 0, ENTRY_PARTIAL = 1, ENTRY_ERROR = -1 };

/*
 * Read and CRC-check the entry at pos of p[0:size].  Errors are raised as the Python
 * read_shallow raises them; `inner` >= 0 re-anchors them the way _inner_payloads does
 * ("inside the compressed message: ... (at inner byte offset pos)" at offset `inner`).
 */
static int read_entry(const unsigned char *p, int64_t size, int64_t pos, long long base,
                      long long inner, entry_t *e)
{
    if (size - pos < 4)
        return ENTRY_PARTIAL;
    int32_t n = be32s(p + pos);
    const char *prefix = inner >= 0 ? "inside the compressed message: " : "";
    long long at = inner >= 0 ? inner : base + pos;
    char tail[48] = "";
    /* Formatted on the error paths only (this runs for every inner message). */
#define FORMAT_TAIL() \
    if (inner >= 0) \
        PyOS_snprintf(tail, sizeof tail, " (at inner byte offset %lld)", (long long)pos)
    if (n < 5) {
        FORMAT_TAIL();
        raise_at(InvalidMessageSizeError, at, "%sinvalid message length %d%s", prefix, (int)n,
                 tail);
        return ENTRY_ERROR;
    }
    if ((int64_t)n > size - pos - 4)
        return ENTRY_PARTIAL;
    e->end = pos + 4 + (int64_t)n;
    e->magic = p[pos + 4];
    uint32_t stored;
    if (e->magic == 1) {
        if (n < 6) {
            FORMAT_TAIL();
            raise_at(InvalidMessageSizeError, at,
                     "%sinvalid message length %d for magic 1%s", prefix, (int)n, tail);
            return ENTRY_ERROR;
        }
        e->attributes = p[pos + 5];
        stored = be32u(p + pos + 6);
        e->payload = pos + 10;
    }
    else if (e->magic == 0) {
        e->attributes = 0;
        stored = be32u(p + pos + 5);
        e->payload = pos + 9;
    }
    else {
        FORMAT_TAIL();
        raise_at(UnknownMagicError, at, "%sunknown magic byte %d%s", prefix, e->magic, tail);
        return ENTRY_ERROR;
    }
    uint32_t computed = crc_of(p + e->payload, e->end - e->payload);
    if (computed != stored) {
        FORMAT_TAIL();
        raise_at(CorruptMessageError, at, "%sCRC mismatch: stored 0x%08x, computed 0x%08x%s",
                 prefix, (unsigned)stored, (unsigned)computed, tail);
        return ENTRY_ERROR;
    }
    return ENTRY_OK;
#undef FORMAT_TAIL
}

/* -- sinks: where decoded payloads go ------------------------------------------------------ */

/* A growable byte buffer (for the batch form's values and arrays). */
typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} growbuf_t;

static int gb_reserve(growbuf_t *b, Py_ssize_t extra)
{
    if (extra > PY_SSIZE_T_MAX - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = b->len + extra;
    if (need <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < need)
        cap = cap > PY_SSIZE_T_MAX / 2 ? need : cap * 2;
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int gb_put(growbuf_t *b, const void *src, Py_ssize_t n)
{
    if (b->cap - b->len < n && gb_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static inline int gb_put_i64(growbuf_t *b, int64_t v)
{
    return gb_put(b, &v, (Py_ssize_t)sizeof v);
}

/* The batch's payload buffer: written straight into a bytes object (no final copy), grown
 * with _PyBytes_Resize (we hold the only reference) and shrunk to its length at the end. */
typedef struct {
    PyObject *bytes;
    Py_ssize_t len;
} valbuf_t;

static int vb_put(valbuf_t *v, const unsigned char *src, Py_ssize_t n)
{
    Py_ssize_t cap = PyBytes_GET_SIZE(v->bytes);
    if (cap - v->len < n) {
        if (n > PY_SSIZE_T_MAX / 2 - v->len) {
            PyErr_NoMemory();
            return -1;
        }
        Py_ssize_t want = cap * 2 > v->len + n ? cap * 2 : v->len + n;
        if (_PyBytes_Resize(&v->bytes, want) < 0)
            return -1;
    }
    memcpy(PyBytes_AS_STRING(v->bytes) + v->len, src, (size_t)n);
    v->len += n;
    return 0;
}

/*
 * The output of a walk: a list of (offset, next_offset, payload) tuples (`list` set), the
 * batch arrays (payloads appended to `values`, their end to `ends`; offsets/next_offsets are
 * int64 arrays), or -- `counting` -- only the counts validate_message_set reports.
 */
typedef struct {
    int counting;          /* count mode: shallow / deep / largest only */
    Py_ssize_t shallow, deep, largest;
    PyObject *list;        /* list mode */
    PyObject *last_stop;   /* list mode: the previous entry's next_offset object (reused) */
    long long last_stop_value;
    growbuf_t offsets, nexts, ends;   /* batch mode */
    valbuf_t values;
} sink_t;

static int sink_plain(sink_t *s, long long start, long long stop, const unsigned char *payload,
                      Py_ssize_t n)
{
    if (s->counting) {
        s->shallow++;
        s->deep++;
        if (n > s->largest)
            s->largest = n;
        return 0;
    }
    if (s->list == NULL) {
        if (vb_put(&s->values, payload, n) < 0 || gb_put_i64(&s->offsets, start) < 0 ||
            gb_put_i64(&s->nexts, stop) < 0 || gb_put_i64(&s->ends, s->values.len) < 0)
            return -1;
        return 0;
    }
    PyObject *start_obj;
    if (s->last_stop != NULL && s->last_stop_value == start) {
        start_obj = s->last_stop;       /* consecutive messages share the boundary int */
        Py_INCREF(start_obj);
    }
    else if ((start_obj = PyLong_FromLongLong(start)) == NULL)
        return -1;
    PyObject *stop_obj = PyLong_FromLongLong(stop);
    PyObject *value = PyBytes_FromStringAndSize((const char *)payload, n);
    PyObject *item = PyTuple_New(3);
    if (stop_obj == NULL || value == NULL || item == NULL) {
        Py_DECREF(start_obj);
        Py_XDECREF(stop_obj);
        Py_XDECREF(value);
        Py_XDECREF(item);
        return -1;
    }
    PyTuple_SET_ITEM(item, 0, start_obj);
    Py_INCREF(stop_obj);
    PyTuple_SET_ITEM(item, 1, stop_obj);
    PyTuple_SET_ITEM(item, 2, value);
    /* Only ints and bytes inside: it can never be part of a cycle, so keep it out of the
     * cyclic GC's young generation (CPython untracks such tuples itself, but only later). */
    PyObject_GC_UnTrack(item);
    int rc = PyList_Append(s->list, item);
    Py_DECREF(item);
    Py_XSETREF(s->last_stop, stop_obj);
    s->last_stop_value = stop;
    return rc;
}

/* -- compressed wrappers ------------------------------------------------------------------- */

/*
 * inflate(codec, payload, max_size, offset) -> bytes is messageset._inflate_at: it raises
 * the codec's typed error re-anchored at `offset`, exactly like the pure path.
 */
static PyObject *call_inflate(PyObject *inflate, int codec, const unsigned char *payload,
                              Py_ssize_t n, long long max_size, long long offset)
{
    PyObject *raw = PyBytes_FromStringAndSize((const char *)payload, n);
    if (raw == NULL)
        return NULL;
    PyObject *out = PyObject_CallFunction(inflate, "iOLL", codec, raw, max_size, offset);
    Py_DECREF(raw);
    if (out != NULL && !PyBytes_Check(out)) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_TypeError, "inflate callback must return bytes");
        return NULL;
    }
    return out;
}

/* Append the payloads of one decompressed set (nested wrappers expanded) to `out`, a list of
 * (bytes) or, in batch mode (out == NULL), to s->values/s->ends with a count in *count. */
static int inner_walk(const unsigned char *p, int64_t size, long long offset,
                      long long *budget, int depth, PyObject *inflate, PyObject *out,
                      sink_t *s, Py_ssize_t *count)
{
    if (depth > MAX_NESTING) {
        raise_at(CompressionError, offset, "compressed messages nested too deeply");
        return -1;
    }
    int64_t pos = 0;
    while (pos < size) {
        entry_t e;
        int rc = read_entry(p, size, pos, 0, offset, &e);
        if (rc == ENTRY_ERROR)
            return -1;
        if (rc == ENTRY_PARTIAL) {
            raise_at(InvalidMessageSizeError, offset,
                     "compressed message set ends inside a message");
            return -1;
        }
        int codec = e.magic == 1 ? (e.attributes & 3) : 0;
        if (codec == 3) {
            raise_at(CompressionError, offset, "unknown compression codec 3");
            return -1;
        }
        Py_ssize_t n = (Py_ssize_t)(e.end - e.payload);
        if (codec == 0) {
            if (out != NULL) {
                PyObject *value = PyBytes_FromStringAndSize((const char *)p + e.payload, n);
                if (value == NULL)
                    return -1;
                int arc = PyList_Append(out, value);
                Py_DECREF(value);
                if (arc < 0)
                    return -1;
            }
            else {
                if (!s->counting && (vb_put(&s->values, p + e.payload, n) < 0 ||
                                     gb_put_i64(&s->ends, s->values.len) < 0))
                    return -1;
                (*count)++;
            }
        }
        else {
            PyObject *inflated = call_inflate(inflate, codec, p + e.payload, n, *budget, offset);
            if (inflated == NULL)
                return -1;
            *budget -= (long long)PyBytes_GET_SIZE(inflated);
            int irc = inner_walk((const unsigned char *)PyBytes_AS_STRING(inflated),
                                 PyBytes_GET_SIZE(inflated), offset, budget, depth + 1,
                                 inflate, out, s, count);
            Py_DECREF(inflated);
            if (irc < 0)
                return -1;
        }
        pos = e.end;
    }
    return 0;
}

/* Expand one shallow wrapper at [start, stop) into the sink with the reference offsets. */
static int expand(sink_t *s, int codec, const unsigned char *payload, Py_ssize_t n,
                  long long start, long long stop, long long max_inflated, PyObject *inflate)
{
    PyObject *inflated = call_inflate(inflate, codec, payload, n, max_inflated, start);
    if (inflated == NULL)
        return -1;
    long long budget = max_inflated - (long long)PyBytes_GET_SIZE(inflated);
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(inflated);
    Py_ssize_t size = PyBytes_GET_SIZE(inflated);
    int rc;
    if (s->counting) {
        Py_ssize_t count = 0;
        rc = inner_walk(data, size, start, &budget, 1, inflate, NULL, s, &count);
        s->shallow++;
        s->deep += count;
        if (n > s->largest)
            s->largest = n;
        Py_DECREF(inflated);
        return rc;
    }
    if (s->list == NULL) {
        Py_ssize_t count = 0;
        rc = inner_walk(data, size, start, &budget, 1, inflate, NULL, s, &count);
        for (Py_ssize_t i = 0; rc == 0 && i < count; i++) {
            if (gb_put_i64(&s->offsets, start) < 0 ||
                gb_put_i64(&s->nexts, i == count - 1 ? stop : start) < 0)
                rc = -1;
        }
        Py_DECREF(inflated);
        return rc;
    }
    PyObject *values = PyList_New(0);
    if (values == NULL) {
        Py_DECREF(inflated);
        return -1;
    }
    rc = inner_walk(data, size, start, &budget, 1, inflate, values, s, NULL);
    Py_DECREF(inflated);
    PyObject *start_obj = rc == 0 ? PyLong_FromLongLong(start) : NULL;
    PyObject *stop_obj = start_obj != NULL ? PyLong_FromLongLong(stop) : NULL;
    if (stop_obj == NULL)
        rc = -1;
    Py_ssize_t count = PyList_GET_SIZE(values);
    for (Py_ssize_t i = 0; rc == 0 && i < count; i++) {
        PyObject *next = i == count - 1 ? stop_obj : start_obj;
        PyObject *item = PyTuple_Pack(3, start_obj, next, PyList_GET_ITEM(values, i));
        if (item != NULL)
            PyObject_GC_UnTrack(item);    /* ints and bytes only, as in sink_plain */
        if (item == NULL || PyList_Append(s->list, item) < 0)
            rc = -1;
        Py_XDECREF(item);
    }
    Py_XDECREF(start_obj);
    Py_XDECREF(stop_obj);
    Py_DECREF(values);
    Py_CLEAR(s->last_stop);
    return rc;
}

/* -- the top-level walk -------------------------------------------------------------------- */

/* Walk p[0:size]; returns valid_bytes, or -1 with an exception set. */
static int64_t walk(sink_t *s, const unsigned char *p, int64_t size, long long base,
                    long long max_inflated, int deep, PyObject *inflate)
{
    int64_t pos = 0;
    while (pos < size) {
        /* Fast path (what Scala producers write): magic 1, attributes 0, CRC good. */
        if (size - pos >= 10) {
            int32_t n = be32s(p + pos);
            if (n >= 6 && (int64_t)n <= size - pos - 4 && p[pos + 4] == 1 && p[pos + 5] == 0) {
                int64_t end = pos + 4 + (int64_t)n;
                if (crc_of(p + pos + 10, n - 6) == be32u(p + pos + 6)) {
                    if (sink_plain(s, base + pos, base + end, p + pos + 10, n - 6) < 0)
                        return -1;
                    pos = end;
                    continue;
                }
            }
        }
        /* General path: magic 0, wrappers, partial tail, corruption (raises). */
        entry_t e;
        int rc = read_entry(p, size, pos, base, -1, &e);
        if (rc == ENTRY_ERROR)
            return -1;
        if (rc == ENTRY_PARTIAL)
            break;
        long long start = base + pos, stop = base + e.end;
        int codec = e.magic == 1 ? (e.attributes & 3) : 0;
        if (codec == 3) {
            raise_at(CompressionError, start, "unknown compression codec 3");
            return -1;
        }
        Py_ssize_t n = (Py_ssize_t)(e.end - e.payload);
        if (codec == 0 || !deep) {
            if (sink_plain(s, start, stop, p + e.payload, n) < 0)
                return -1;
        }
        else if (expand(s, codec, p + e.payload, n, start, stop, max_inflated, inflate) < 0)
            return -1;
        pos = e.end;
    }
    return pos;
}

static void sink_free(sink_t *s)
{
    Py_CLEAR(s->list);
    Py_CLEAR(s->last_stop);
    PyMem_Free(s->offsets.data);
    PyMem_Free(s->nexts.data);
    PyMem_Free(s->ends.data);
    Py_CLEAR(s->values.bytes);
}

/* Arguments shared by decode and decode_batch. */
static int parse(PyObject *args, PyObject **data, long long *base, long long *max_inflated,
                 int *deep, PyObject **inflate)
{
    if (!PyArg_ParseTuple(args, "SLLpO", data, base, max_inflated, deep, inflate))
        return -1;
    Py_ssize_t size = PyBytes_GET_SIZE(*data);
    /* Offsets are base + position: keep them inside int64 (the wrapper checks it too). */
    if (*base > LLONG_MAX - size || *base < LLONG_MIN + size) {
        PyErr_SetString(PyExc_OverflowError, "base_offset out of range");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(decode_doc,
"decode(data: bytes, base_offset: int, max_inflated: int, deep: bool, inflate) ->\n"
"    (list[tuple[int, int, bytes]], valid_bytes)\n\n"
"The walk of messageset.decode_message_set; inflate(codec, payload, max_size, offset)\n"
"decompresses one wrapper payload (and raises its typed errors at offset).");

static PyObject *py_decode(PyObject *self, PyObject *args)
{
    PyObject *data, *inflate;
    long long base, max_inflated;
    int deep;
    if (parse(args, &data, &base, &max_inflated, &deep, &inflate) < 0)
        return NULL;
    sink_t s;
    memset(&s, 0, sizeof s);
    if ((s.list = PyList_New(0)) == NULL)
        return NULL;
    int64_t valid = walk(&s, (const unsigned char *)PyBytes_AS_STRING(data),
                         PyBytes_GET_SIZE(data), base, max_inflated, deep, inflate);
    PyObject *result = NULL;
    if (valid >= 0)
        result = Py_BuildValue("(OL)", s.list, (long long)valid);
    sink_free(&s);
    return result;
}

PyDoc_STRVAR(decode_batch_doc,
"decode_batch(data: bytes, base_offset: int, max_inflated: int, deep: bool, inflate) ->\n"
"    (offsets: bytes, next_offsets: bytes, value_offsets: bytes, values: bytes, valid_bytes)\n\n"
"The same walk into a compact batch: native int64 arrays (as bytes) of offsets,\n"
"next_offsets and value_offsets (n + 1 of them, starting at 0: payload i is\n"
"values[value_offsets[i]:value_offsets[i + 1]], Arrow's layout), the payloads back to back.");

static PyObject *py_decode_batch(PyObject *self, PyObject *args)
{
    PyObject *data, *inflate;
    long long base, max_inflated;
    int deep;
    if (parse(args, &data, &base, &max_inflated, &deep, &inflate) < 0)
        return NULL;
    sink_t s;
    memset(&s, 0, sizeof s);
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    /* A plain set needs at most `size` bytes of values; the columns start at one entry per 32
     * bytes (a 100-byte message is 110) and double when smaller messages need more. */
    Py_ssize_t entries = size / 32 + 16;
    s.values.bytes = PyBytes_FromStringAndSize(NULL, size > 0 ? size : 1);
    if (s.values.bytes == NULL || gb_reserve(&s.offsets, entries * 8) < 0 ||
        gb_reserve(&s.nexts, entries * 8) < 0 || gb_reserve(&s.ends, (entries + 1) * 8) < 0 ||
        gb_put_i64(&s.ends, 0) < 0) {
        sink_free(&s);
        return NULL;
    }
    int64_t valid = walk(&s, (const unsigned char *)PyBytes_AS_STRING(data), size, base,
                         max_inflated, deep, inflate);
    PyObject *result = NULL;
    if (valid >= 0 && _PyBytes_Resize(&s.values.bytes, s.values.len) == 0)
        result = Py_BuildValue("(y#y#y#OL)", s.offsets.data, s.offsets.len, s.nexts.data,
                               s.nexts.len, s.ends.data, s.ends.len, s.values.bytes,
                               (long long)valid);
    sink_free(&s);
    return result;
}

PyDoc_STRVAR(validate_doc,
"validate(data: bytes, max_inflated: int, inflate) ->\n"
"    (valid_bytes, shallow_count, deep_count, max_shallow_payload)\n\n"
"The walk of messageset.validate_message_set: every CRC checked, wrappers expanded and\n"
"counted, nothing kept.");

static PyObject *py_validate(PyObject *self, PyObject *args)
{
    PyObject *data, *inflate;
    long long max_inflated;
    if (!PyArg_ParseTuple(args, "SLO", &data, &max_inflated, &inflate))
        return NULL;
    sink_t s;
    memset(&s, 0, sizeof s);
    s.counting = 1;
    int64_t valid = walk(&s, (const unsigned char *)PyBytes_AS_STRING(data),
                         PyBytes_GET_SIZE(data), 0, max_inflated, 1, inflate);
    sink_free(&s);
    if (valid < 0)
        return NULL;
    return Py_BuildValue("(Lnnn)", (long long)valid, s.shallow, s.deep, s.largest);
}

/*
 * Record: the compiled base of zkconsumer.consumer.Message (the consumer's per-message
 * object).  Why: with the batch decoded, building one Message per message through a Python
 * __init__ is most of what the per-message API costs; a C constructor takes a fraction.
 *
 * Invariants: the seven fields are set once by tp_new and read-only afterwards (a Message
 * is a value); they hold the topic (str), ints, the payload (bytes) and the partition's
 * state object, which never refers back to messages -- so a Record cannot be part of a
 * reference cycle and is not tracked by the cyclic GC (allocating one costs no GC work).
 */
typedef struct {
    PyObject_HEAD
    PyObject *topic;
    PyObject *broker_id;
    PyObject *partition_id;
    PyObject *offset;
    PyObject *next_offset;
    PyObject *value;
    PyObject *state;
} Record;

static PyObject *record_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"topic", "broker_id", "partition_id", "offset", "next_offset",
                             "value", "state", NULL};
    PyObject *f[7] = {NULL, NULL, NULL, NULL, NULL, NULL, Py_None};
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (kwds == NULL && (n == 6 || n == 7)) {  /* the hot path: positional */
        for (Py_ssize_t i = 0; i < n; i++)
            f[i] = PyTuple_GET_ITEM(args, i);
    } else if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOO|O:Message", kwlist, &f[0],
                                            &f[1], &f[2], &f[3], &f[4], &f[5], &f[6])) {
        return NULL;
    }
    Record *self = (Record *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    PyObject **slot = &self->topic;
    for (int i = 0; i < 7; i++) {
        Py_INCREF(f[i]);
        slot[i] = f[i];
    }
    return (PyObject *)self;
}

static void record_dealloc(Record *self)
{
    /* a heap subclass (Message) is decref'd by its own subtype_dealloc, not here */
    Py_XDECREF(self->topic);
    Py_XDECREF(self->broker_id);
    Py_XDECREF(self->partition_id);
    Py_XDECREF(self->offset);
    Py_XDECREF(self->next_offset);
    Py_XDECREF(self->value);
    Py_XDECREF(self->state);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef record_members[] = {
    {"topic", T_OBJECT_EX, offsetof(Record, topic), READONLY, NULL},
    {"broker_id", T_OBJECT_EX, offsetof(Record, broker_id), READONLY, NULL},
    {"partition_id", T_OBJECT_EX, offsetof(Record, partition_id), READONLY, NULL},
    {"offset", T_OBJECT_EX, offsetof(Record, offset), READONLY, NULL},
    {"next_offset", T_OBJECT_EX, offsetof(Record, next_offset), READONLY, NULL},
    {"value", T_OBJECT_EX, offsetof(Record, value), READONLY, NULL},
    {"_state", T_OBJECT_EX, offsetof(Record, state), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject RecordType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "zkconsumer.protocol._speedups.Record",
    .tp_basicsize = sizeof(Record),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Record(topic, broker_id, partition_id, offset, next_offset, value, state=None):\n"
              "the compiled base of zkconsumer.consumer.Message (read-only fields).",
    .tp_new = record_new,
    .tp_dealloc = (destructor)record_dealloc,
    .tp_members = record_members,
};

static PyMethodDef methods[] = {
    {"validate", py_validate, METH_VARARGS, validate_doc},
    {"crc32", py_crc32, METH_O,
     "crc32(data) -> int: zlib.crc32(data), computed as the walk computes it (also used by\n"
     "the producer's encoder, zkconsumer/producer/encoding.py)."},
    {"decode", py_decode, METH_VARARGS, decode_doc},
    {"decode_batch", py_decode_batch, METH_VARARGS, decode_batch_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "zkconsumer.protocol._speedups",
    "Compiled message-set walk for zkconsumer.protocol.messageset (optional).", -1, methods,
    NULL, NULL, NULL, NULL,
};

static const char *use_clmul_name(void)
{
#ifdef HAVE_CLMUL
    if (use_clmul)
        return "pclmulqdq+zlib";
#endif
    return "zlib";
}

PyMODINIT_FUNC PyInit__speedups(void)
{
    crc_table_init();
#ifdef HAVE_CLMUL
    __builtin_cpu_init();
    use_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    if (getenv("ZKCONSUMER_NO_CLMUL") != NULL)
        use_clmul = 0;
#endif
    PyObject *errors = PyImport_ImportModule("zkconsumer.errors");
    if (errors == NULL)
        return NULL;
    InvalidMessageSizeError = PyObject_GetAttrString(errors, "InvalidMessageSizeError");
    UnknownMagicError = PyObject_GetAttrString(errors, "UnknownMagicError");
    CorruptMessageError = PyObject_GetAttrString(errors, "CorruptMessageError");
    CompressionError = PyObject_GetAttrString(errors, "CompressionError");
    Py_DECREF(errors);
    if (!InvalidMessageSizeError || !UnknownMagicError || !CorruptMessageError ||
        !CompressionError)
        return NULL;
    if (PyType_Ready(&RecordType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&RecordType);
    if (PyModule_AddObject(m, "Record", (PyObject *)&RecordType) < 0) {
        Py_DECREF(&RecordType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "API_VERSION", API_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "MAX_NESTING", MAX_NESTING) < 0 ||
        PyModule_AddStringConstant(m, "CRC32", use_clmul_name()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
