/* countersign's compiled verifier: docs/ledger-format.md, sections 2 to 6 and the workflow rules.
 *
 * It is a fast path, not a second judge. Verifier.feed() takes whole lines of a ledger, in order,
 * and checks each completely: the line layout; the body in its one canonical layout (members in
 * order, no spacing, minimal string escapes, plain integers), with the types and values section 3
 * allows; seq, prev and SHA-256 of the body as stored; ts a real UTC time, never going backwards;
 * the data beside the body with its structural digests (section 4) in its canonical spelling; and
 * the workflow rules, through the same fold as ledger/workflow/machine.py. Anything it finds wrong, and
 * anything it does not handle (recovered, redacted and roster events, signed decisions, floats, escaped object keys, deep
 * nesting, long integers, lines over MAX_LINE_BYTES), makes it decline (-1); ledger/store/native.py then hands the ledger to the
 * reference verifier (ledger/proof/verify.py), which judges it and words the problem. So the rule for
 * every check below: accept only what the reference accepts; when unsure, decline.
 *
 * Memory: the open requests (a hash table by seq) and one byte per request seq for the final
 * status of a closed one, as Workflow(keep_final=False) keeps. Strings of open requests (the
 * proposer, approvers, requirements) are copied; everything else points into the caller's
 * buffer for the span of one line.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#ifndef COUNTERSIGN_SOURCE_SHA256
#define COUNTERSIGN_SOURCE_SHA256 "unknown"
#endif

typedef const unsigned char *Ptr;
typedef struct { Ptr p, end; } Cur;
typedef struct { Ptr s; Py_ssize_t n; } Span;

#define MAX_DEPTH 64          /* deeper data: declined (the writer allows 100; the reference reads it) */
#define MAX_BODY_DIGITS 18    /* a body integer longer than this: declined (fits int64) */
#define MAX_DATA_DIGITS 300   /* a data integer longer than this: declined */
#define MAX_QUORUMS 64
#define MAX_NAMES 1024        /* approvers named in one requirements object */
/* The longest line, line feed not counted (docs/ledger-format.md, section 2; ledger.store.lines.MAX_LINE_BYTES):
 * a longer line is declined, and seal() refuses to compose one. */
#define MAX_LINE_BYTES (16 * 1024 * 1024)
#define LINE_OVERHEAD (8 + 9 + 64 + 9 + 1)  /* a line's bytes beside BODY and DATA */

/* ---- statuses: 1..6 are the final ones, in ledger/workflow/machine.py's FINAL order --------------- */
enum {
    ST_NONE = 0, ST_DENIED, ST_REJECTED, ST_RESPONDED, ST_EXPIRED, ST_CANCELLED, ST_EXECUTED,
    ST_ALLOWED, ST_INTERRUPTING, ST_PENDING, ST_APPROVED, ST_EXECUTING, ST_COUNT
};
static const char *STATUS_NAMES[ST_COUNT] = {
    "", "denied", "rejected", "responded", "expired", "cancelled", "executed",
    "allowed", "interrupting", "pending", "approved", "executing",
};
#define IS_FINAL(s) ((s) >= ST_DENIED && (s) <= ST_EXECUTED)

enum { D_APPROVE = 1, D_EDIT = 2, D_REJECT = 4, D_RESPOND = 8 };
enum { EFF_ALLOW, EFF_DENY, EFF_ASK };
enum {
    K_GENESIS, K_PROPOSED, K_INTERRUPTED, K_APPROVED, K_EDITED, K_REJECTED, K_RESPONDED,
    K_EXPIRED, K_CANCELLED, K_EXEC_STARTED, K_EXECUTED, K_POLICY
};

/* ---- requirements ---------------------------------------------------------------------------- */
typedef struct {
    int64_t count;
    int anyone;           /* approvers null: admits anyone (but the proposer, checked apart) */
    Py_ssize_t n;
    Span *names;          /* canonical JSON spellings; equal spellings are equal strings */
} Quorum;

typedef struct { Span name; Py_ssize_t q; } NameRef;

typedef struct {
    Py_ssize_t nq;
    Quorum *q;
    unsigned decisions;
    /* For counting approvals as they come (a copy from reqs_copy only): every (identity, quorum
     * naming it) pair once, sorted by the identity's bytes; whether some quorum admits anyone,
     * and the largest count among those (they all count every distinct approver). */
    NameRef *index;
    Py_ssize_t nindex, named;
    int any_anyone;
    int64_t anyone_needed;
} Reqs;

/* A set of identities (owned copies), open addressing, keyed with Python's own randomized hash
 * (SipHash) so that no ledger can be crafted to make it collide. */
typedef struct {
    Span *slots;     /* s == NULL: empty */
    Py_ssize_t cap, n;
} SpanSet;

/* Room for parsing one requirements object; one per thread. */
typedef struct {
    Quorum sq[MAX_QUORUMS];
    Span snames[MAX_NAMES];
} Scratch;

/* ---- one open request ------------------------------------------------------------------------ */
typedef struct {
    int64_t seq;
    uint8_t status;
    unsigned char digest[64];    /* current arguments digest, hex */
    unsigned char deadline[27];
    int has_deadline;
    unsigned char *proposer;
    Py_ssize_t proposer_n;
    Reqs *reqs;                  /* owned; NULL until interrupted */
    /* The approvals of `digest`, counted as they come, so that N approvals cost O(N) and not
     * O(N x identities) (ledger/workflow/machine.py's Tally does the same): */
    SpanSet approvals;           /* distinct approvers */
    int64_t *counts;             /* per quorum: approvers it admits */
    Py_ssize_t unmet;            /* named quorums whose count is not reached */
} Req;

typedef struct { int64_t key; Req *val; } Slot;   /* key 0: empty, -1: deleted */

typedef struct {
    PyObject_HEAD
    int64_t expected;            /* seq of the next line */
    unsigned char prev[64];      /* hash of the previous line, hex */
    unsigned char prev_ts[27];
    int has_prev_ts;
    int64_t head_seen_at;
    int expect_head_set;
    unsigned char expect_head[64];
    int declined;
    int version2;                /* the genesis says countersign-ledger/2 (a `policy` event is lawful) */
    int initialized;             /* __init__ ran (it runs once) */
    int busy;                    /* a feed() is running (without the GIL) */
    /* open requests */
    Slot *slots;
    Py_ssize_t cap, used, filled;  /* used: live entries; filled: live + deleted */
    /* closed requests: final status code by seq */
    uint8_t *closed;
    Py_ssize_t closed_cap;
    int64_t closed_counts[ST_COUNT];
    Scratch scratch;             /* for the sequential phase */
    int threads;                 /* for the stateless phase: 1 or 2 */
    /* per feed(): where each line starts and ends, and what the stateless phase read */
    Ptr *starts, *ends;
    struct Event *events;
    Py_ssize_t lines_cap;
} Verifier;

/* ---- small parsing helpers ------------------------------------------------------------------- */
static inline int lit(Cur *c, const char *s, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0) return 0;
    c->p += n;
    return 1;
}
#define LIT(c, s) lit((c), (s), sizeof(s) - 1)

static inline int hexlower(unsigned char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

static inline int is_hexlower(unsigned char ch) { return ((unsigned)ch - (unsigned)'0' < 10u) | ((unsigned)ch - (unsigned)'a' < 6u); }

/* A JSON string in the canonical spelling msgspec writes: `\"`, `\\`, the five short escapes for
 * their control characters, `\u00xx` (lowercase) for the other control characters, everything
 * else as itself in strict UTF-8 (no overlong forms, no surrogates, at most U+10FFFF). When `h`
 * is given, the decoded UTF-8 bytes are fed to it. `raw` gets the bytes between the quotes,
 * `chars` the number of characters, `escaped` whether any escape occurred. */
static int scan_str(Cur *c, SHA256_CTX *h, Span *raw, Py_ssize_t *chars, int *escaped) {
    Ptr p = c->p, end = c->end;
    if (p >= end || *p != '"') return 0;
    Ptr start = ++p, run = p;
    Py_ssize_t n = 0;
    int esc = 0;
    for (;;) {
        if (p >= end) return 0;
        unsigned char ch = *p;
        if (ch == '"') break;
        if (ch == '\\') {
            unsigned char out;
            if (end - p < 2) return 0;
            if (h && p > run) SHA256_Update(h, run, (size_t)(p - run));
            switch (p[1]) {
            case '"': out = '"'; p += 2; break;
            case '\\': out = '\\'; p += 2; break;
            case 'n': out = '\n'; p += 2; break;
            case 'r': out = '\r'; p += 2; break;
            case 't': out = '\t'; p += 2; break;
            case 'b': out = '\b'; p += 2; break;
            case 'f': out = '\f'; p += 2; break;
            case 'u': {
                int hi, lo;
                if (end - p < 6 || p[2] != '0' || p[3] != '0') return 0;
                hi = hexlower(p[4]);
                lo = hexlower(p[5]);
                if (hi < 0 || lo < 0) return 0;
                out = (unsigned char)(hi * 16 + lo);
                if (out >= 0x20 || out == '\n' || out == '\r' || out == '\t' || out == '\b' || out == '\f') return 0;
                p += 6;
                break;
            }
            default:
                return 0;
            }
            if (h) SHA256_Update(h, &out, 1);
            n++;
            esc = 1;
            run = p;
            continue;
        }
        if (ch < 0x20) return 0;
        if (ch < 0x80) {
            p++;
            n++;
            continue;
        }
        {
            int len, i;
            uint32_t cp;
            if (ch >= 0xC2 && ch <= 0xDF) { len = 2; cp = ch & 0x1F; }
            else if (ch >= 0xE0 && ch <= 0xEF) { len = 3; cp = ch & 0x0F; }
            else if (ch >= 0xF0 && ch <= 0xF4) { len = 4; cp = ch & 0x07; }
            else return 0;
            if (end - p < len) return 0;
            for (i = 1; i < len; i++) {
                if ((p[i] & 0xC0) != 0x80) return 0;
                cp = (cp << 6) | (p[i] & 0x3F);
            }
            if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
            if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
            p += len;
            n++;
        }
    }
    if (h && p > run) SHA256_Update(h, run, (size_t)(p - run));
    if (raw) { raw->s = start; raw->n = p - start; }
    if (chars) *chars = n;
    if (escaped) *escaped = esc;
    c->p = p + 1;
    return 1;
}

static inline int str(Cur *c, Span *raw) { return scan_str(c, NULL, raw, NULL, NULL); }

static inline int str_or_null(Cur *c, Span *raw, int *is_null) {
    if (LIT(c, "null")) { *is_null = 1; return 1; }
    *is_null = 0;
    return str(c, raw);
}

/* A non-negative integer as msgspec writes it: no sign, no leading zero, at most 18 digits. */
static int uint_(Cur *c, int64_t *out) {
    Ptr p = c->p;
    int64_t v = 0;
    int digits = 0;
    if (p >= c->end || *p < '0' || *p > '9') return 0;
    if (*p == '0') {
        p++;
        if (p < c->end && *p >= '0' && *p <= '9') return 0;
    } else {
        while (p < c->end && *p >= '0' && *p <= '9') {
            if (++digits > MAX_BODY_DIGITS) return 0;
            v = v * 10 + (*p - '0');
            p++;
        }
    }
    c->p = p;
    *out = v;
    return 1;
}

static inline int hex64(Cur *c, Ptr *out) {
    int i;
    if (c->end - c->p < 66 || c->p[0] != '"' || c->p[65] != '"') return 0;
    for (i = 1; i <= 64; i++)
        if (!is_hexlower(c->p[i])) return 0;
    *out = c->p + 1;
    c->p += 66;
    return 1;
}

static int days_in_month(int year, int month) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month == 2 && ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0)) return 29;
    return days[month - 1];
}

/* `"YYYY-MM-DDTHH:MM:SS.ffffffZ"`, ASCII digits, a real date and time (year 1 to 9999, as
 * Python's datetime.fromisoformat reads it; no second 60). */
static int ts(Cur *c, Ptr *out) {
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.ddddddZ";
    Ptr t;
    int i, year, month, day;
    if (c->end - c->p < 29 || c->p[0] != '"' || c->p[28] != '"') return 0;
    t = c->p + 1;
    for (i = 0; i < 27; i++) {
        if (shape[i] == 'd') {
            if (t[i] < '0' || t[i] > '9') return 0;
        } else if (t[i] != (unsigned char)shape[i]) return 0;
    }
#define NUM2(k) ((t[k] - '0') * 10 + (t[(k) + 1] - '0'))
    year = NUM2(0) * 100 + NUM2(2);
    month = NUM2(5);
    day = NUM2(8);
    if (year < 1 || month < 1 || month > 12 || day < 1 || day > days_in_month(year, month)) return 0;
    if (NUM2(11) > 23 || NUM2(14) > 59 || NUM2(17) > 59) return 0;
#undef NUM2
    *out = t;
    c->p += 29;
    return 1;
}

static inline int effect(Cur *c, int *out) {
    if (LIT(c, "\"allow\"")) { *out = EFF_ALLOW; return 1; }
    if (LIT(c, "\"deny\"")) { *out = EFF_DENY; return 1; }
    if (LIT(c, "\"ask\"")) { *out = EFF_ASK; return 1; }
    return 0;
}

/* `[{"id":str,"line":int}...]` */
static int rules(Cur *c) {
    int64_t line;
    Span id;
    if (!LIT(c, "[")) return 0;
    if (LIT(c, "]")) return 1;
    for (;;) {
        if (!LIT(c, "{\"id\":") || !str(c, &id) || !LIT(c, ",\"line\":") || !uint_(c, &line) || !LIT(c, "}")) return 0;
        if (LIT(c, "]")) return 1;
        if (!LIT(c, ",")) return 0;
    }
}

/* `[str...]` */
static int str_list(Cur *c) {
    Span s;
    if (!LIT(c, "[")) return 0;
    if (LIT(c, "]")) return 1;
    for (;;) {
        if (!str(c, &s)) return 0;
        if (LIT(c, "]")) return 1;
        if (!LIT(c, ",")) return 0;
    }
}

/* A Requirements object (dsl/requirements.py), into the verifier's scratch arrays:
 * {"quorums":[{"count":int>=1,"approvers":null|[str...],"group":str?}...],
 *  "decisions":[...],"timeout_seconds":int>=1,"on_timeout":"reject","timeout_message":str?} */
static int requirements(Scratch *v, Cur *c, Reqs *out, Span *raw) {
    Py_ssize_t nq = 0, nn = 0;
    int64_t n;
    int is_null;
    Span s;
    raw->s = c->p;
    out->decisions = 0;
    if (!LIT(c, "{\"quorums\":[")) return 0;
    if (LIT(c, "]")) return 0; /* at least one quorum (section 3) */
    {
        for (;;) {
            Quorum *q;
            if (nq == MAX_QUORUMS) return 0;
            q = &v->sq[nq++];
            if (!LIT(c, "{\"count\":") || !uint_(c, &q->count) || q->count < 1 || !LIT(c, ",\"approvers\":")) return 0;
            q->names = &v->snames[nn];
            q->n = 0;
            if (LIT(c, "null")) {
                q->anyone = 1;
            } else {
                q->anyone = 0;
                if (!LIT(c, "[")) return 0;
                if (!LIT(c, "]")) {
                    for (;;) {
                        if (nn == MAX_NAMES || !str(c, &v->snames[nn])) return 0;
                        nn++;
                        q->n++;
                        if (LIT(c, "]")) break;
                        if (!LIT(c, ",")) return 0;
                    }
                }
            }
            if (!LIT(c, ",\"group\":") || !str_or_null(c, &s, &is_null) || !LIT(c, "}")) return 0;
            if (LIT(c, "]")) break;
            if (!LIT(c, ",")) return 0;
        }
    }
    if (!LIT(c, ",\"decisions\":[")) return 0;
    if (!LIT(c, "]")) {
        for (;;) {
            if (LIT(c, "\"approve\"")) out->decisions |= D_APPROVE;
            else if (LIT(c, "\"edit\"")) out->decisions |= D_EDIT;
            else if (LIT(c, "\"reject\"")) out->decisions |= D_REJECT;
            else if (LIT(c, "\"respond\"")) out->decisions |= D_RESPOND;
            else return 0;
            if (LIT(c, "]")) break;
            if (!LIT(c, ",")) return 0;
        }
    }
    if (!LIT(c, ",\"timeout_seconds\":") || !uint_(c, &n) || n < 1) return 0;
    if (!LIT(c, ",\"on_timeout\":\"reject\",\"timeout_message\":") || !str_or_null(c, &s, &is_null) || !LIT(c, "}")) return 0;
    out->nq = nq;
    out->q = v->sq;
    raw->n = c->p - raw->s;
    return 1;
}

static int nameref_cmp(const void *a, const void *b) {
    const NameRef *x = (const NameRef *)a, *y = (const NameRef *)b;
    Py_ssize_t m = x->name.n < y->name.n ? x->name.n : y->name.n;
    int c = memcmp(x->name.s, y->name.s, (size_t)m);
    if (c) return c;
    if (x->name.n != y->name.n) return x->name.n < y->name.n ? -1 : 1;
    return x->q < y->q ? -1 : x->q > y->q;
}

static inline int span_cmp(Span a, Span b) {
    Py_ssize_t m = a.n < b.n ? a.n : b.n;
    int c = memcmp(a.s, b.s, (size_t)m);
    if (c) return c;
    return a.n < b.n ? -1 : a.n > b.n;
}

static inline int span_eq(Span a, Span b) { return a.n == b.n && memcmp(a.s, b.s, (size_t)a.n) == 0; }

/* A heap copy of parsed requirements (one block), its names pointing into a copy of `raw`, with
 * the index of (identity, quorum) pairs. */
static Reqs *reqs_copy(const Reqs *r, Span raw) {
    Py_ssize_t i, j, k, names = 0;
    size_t size;
    Reqs *out;
    Quorum *qs;
    Span *ns;
    NameRef *index;
    unsigned char *bytes;
    for (i = 0; i < r->nq; i++) names += r->q[i].n;
    size = sizeof(Reqs) + (size_t)r->nq * sizeof(Quorum) + (size_t)names * (sizeof(Span) + sizeof(NameRef)) + (size_t)raw.n;
    out = (Reqs *)PyMem_RawMalloc(size);
    if (out == NULL) return NULL;
    qs = (Quorum *)(out + 1);
    ns = (Span *)(qs + r->nq);
    index = (NameRef *)(ns + names);
    bytes = (unsigned char *)(index + names);
    memcpy(bytes, raw.s, (size_t)raw.n);
    out->nq = r->nq;
    out->q = qs;
    out->decisions = r->decisions;
    out->index = index;
    out->any_anyone = 0;
    out->anyone_needed = 0;
    out->named = 0;
    k = 0;
    for (i = 0; i < r->nq; i++) {
        qs[i] = r->q[i];
        qs[i].names = ns;
        for (j = 0; j < r->q[i].n; j++) {
            ns[j].s = bytes + (r->q[i].names[j].s - raw.s);
            ns[j].n = r->q[i].names[j].n;
            index[k].name = ns[j];
            index[k].q = i;
            k++;
        }
        ns += r->q[i].n;
        if (qs[i].anyone) {
            out->any_anyone = 1;
            if (qs[i].count > out->anyone_needed) out->anyone_needed = qs[i].count;
        } else {
            out->named++;
        }
    }
    /* A name listed twice in one quorum counts once there (Quorum.admits is membership). */
    qsort(index, (size_t)k, sizeof(NameRef), nameref_cmp);
    for (i = 0, j = 0; i < k; i++)
        if (j == 0 || index[i].q != index[j - 1].q || !span_eq(index[i].name, index[j - 1].name)) index[j++] = index[i];
    out->nindex = j;
    return out;
}

/* The first index entry of `who`, or -1. */
static Py_ssize_t index_find(const Reqs *r, Span who) {
    Py_ssize_t lo = 0, hi = r->nindex;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (span_cmp(r->index[mid].name, who) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < r->nindex && span_eq(r->index[lo].name, who) ? lo : -1;
}

/* Requirements.allows: some quorum admits `who`. */
static int reqs_allows(const Reqs *r, Span who) {
    return r->any_anyone || index_find(r, who) >= 0;
}

static int spanset_slot(const SpanSet *set, Span who, Py_ssize_t *slot) {
    Py_ssize_t i = (Py_ssize_t)((size_t)_Py_HashBytes(who.s, who.n) & (size_t)(set->cap - 1));
    while (set->slots[i].s != NULL) {
        if (span_eq(set->slots[i], who)) { *slot = i; return 1; }
        i = (i + 1) & (set->cap - 1);
    }
    *slot = i;
    return 0;
}

static int spanset_has(const SpanSet *set, Span who) {
    Py_ssize_t slot;
    return set->cap > 0 && spanset_slot(set, who, &slot);
}

static void spanset_clear(SpanSet *set) {
    Py_ssize_t i;
    for (i = 0; i < set->cap; i++) PyMem_RawFree((void *)set->slots[i].s);
    PyMem_RawFree(set->slots);
    set->slots = NULL;
    set->cap = set->n = 0;
}

/* Add a copy of `who` (not in the set). 0 when out of memory. */
static int spanset_add(SpanSet *set, Span who) {
    Py_ssize_t slot;
    unsigned char *copy;
    if ((set->n + 1) * 2 > set->cap) {
        SpanSet bigger = {NULL, set->cap ? set->cap * 2 : 8, set->n};
        Py_ssize_t i;
        bigger.slots = (Span *)PyMem_RawCalloc((size_t)bigger.cap, sizeof(Span));
        if (bigger.slots == NULL) return 0;
        for (i = 0; i < set->cap; i++) {
            if (set->slots[i].s != NULL) {
                spanset_slot(&bigger, set->slots[i], &slot);
                bigger.slots[slot] = set->slots[i];
            }
        }
        PyMem_RawFree(set->slots);
        *set = bigger;
    }
    copy = (unsigned char *)PyMem_RawMalloc(who.n ? (size_t)who.n : 1);
    if (copy == NULL) return 0;
    memcpy(copy, who.s, (size_t)who.n);
    spanset_slot(set, who, &slot);
    set->slots[slot].s = copy;
    set->slots[slot].n = who.n;
    set->n++;
    return 1;
}

/* ---- data: structural digests (section 4) of canonically spelled values ------------------- */
static unsigned char D_NULL[32], D_TRUE[32], D_FALSE[32];

static int value_digest(Cur *c, int depth, unsigned char out[32]);

static int object_digest(Cur *c, int depth, unsigned char out[32]) {
    SHA256_CTX h;
    Span prev_key = {NULL, -1};
    SHA256_Init(&h);
    SHA256_Update(&h, "o", 1);
    c->p++; /* { */
    if (!LIT(c, "}")) {
        for (;;) {
            SHA256_CTX kh;
            unsigned char kd[32], vd[32];
            Span key;
            int escaped;
            Py_ssize_t chars;
            SHA256_Init(&kh);
            SHA256_Update(&kh, "s", 1);
            if (!scan_str(c, &kh, &key, &chars, &escaped) || escaped) return 0;
            /* Keys in strictly ascending order of their bytes (no escapes, so the bytes as
             * stored are the UTF-8 bytes): the canonical spelling sorts them, and a repeated
             * key is refused. */
            if (prev_key.n >= 0) {
                Py_ssize_t m = prev_key.n < key.n ? prev_key.n : key.n;
                int cmp = memcmp(prev_key.s, key.s, (size_t)m);
                if (cmp > 0 || (cmp == 0 && prev_key.n >= key.n)) return 0;
            }
            prev_key = key;
            SHA256_Final(kd, &kh);
            if (!LIT(c, ":") || !value_digest(c, depth, vd)) return 0;
            SHA256_Update(&h, kd, 32);
            SHA256_Update(&h, vd, 32);
            if (LIT(c, "}")) break;
            if (!LIT(c, ",")) return 0;
        }
    }
    SHA256_Final(out, &h);
    return 1;
}

static int list_digest(Cur *c, int depth, unsigned char out[32]) {
    SHA256_CTX h;
    SHA256_Init(&h);
    SHA256_Update(&h, "l", 1);
    c->p++; /* [ */
    if (!LIT(c, "]")) {
        for (;;) {
            unsigned char d[32];
            if (!value_digest(c, depth, d)) return 0;
            SHA256_Update(&h, d, 32);
            if (LIT(c, "]")) break;
            if (!LIT(c, ",")) return 0;
        }
    }
    SHA256_Final(out, &h);
    return 1;
}

/* An integer in its canonical spelling (`-?(0|[1-9][0-9]*)`, not `-0`), whose digest text is
 * that spelling. A fraction or an exponent (a float) is declined. */
static int number_digest(Cur *c, unsigned char out[32]) {
    Ptr p = c->p, start = c->p;
    SHA256_CTX h;
    if (*p == '-') p++;
    if (p >= c->end || *p < '0' || *p > '9') return 0;
    if (*p == '0') {
        p++;
        if (start[0] == '-') return 0; /* -0 */
    } else {
        while (p < c->end && *p >= '0' && *p <= '9') p++;
    }
    if (p - start > MAX_DATA_DIGITS) return 0;
    if (p < c->end && (*p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9'))) return 0;
    SHA256_Init(&h);
    SHA256_Update(&h, "d", 1);
    SHA256_Update(&h, start, (size_t)(p - start));
    SHA256_Final(out, &h);
    c->p = p;
    return 1;
}

static int value_digest(Cur *c, int depth, unsigned char out[32]) {
    if (c->p >= c->end) return 0;
    switch (*c->p) {
    case '{':
        if (depth >= MAX_DEPTH) return 0;
        return object_digest(c, depth + 1, out);
    case '[':
        if (depth >= MAX_DEPTH) return 0;
        return list_digest(c, depth + 1, out);
    case '"': {
        SHA256_CTX h;
        SHA256_Init(&h);
        SHA256_Update(&h, "s", 1);
        if (!scan_str(c, &h, NULL, NULL, NULL)) return 0;
        SHA256_Final(out, &h);
        return 1;
    }
    case 'n':
        if (!LIT(c, "null")) return 0;
        memcpy(out, D_NULL, 32);
        return 1;
    case 't':
        if (!LIT(c, "true")) return 0;
        memcpy(out, D_TRUE, 32);
        return 1;
    case 'f':
        if (!LIT(c, "false")) return 0;
        memcpy(out, D_FALSE, 32);
        return 1;
    default:
        return number_digest(c, out);
    }
}

static const char HEX[] = "0123456789abcdef";

static inline int digest_is(const unsigned char d[32], Ptr hex) {
    int i;
    for (i = 0; i < 32; i++)
        if (hex[2 * i] != (unsigned char)HEX[d[i] >> 4] || hex[2 * i + 1] != (unsigned char)HEX[d[i] & 15]) return 0;
    return 1;
}

/* ---- open requests ------------------------------------------------------------------------- */
static void req_free(Req *r) {
    if (r == NULL) return;
    spanset_clear(&r->approvals);
    PyMem_RawFree(r->counts);
    PyMem_RawFree(r->reqs);
    PyMem_RawFree(r->proposer);
    PyMem_RawFree(r);
}

static inline Py_ssize_t slot_of(int64_t key, Py_ssize_t cap) {
    uint64_t x = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (Py_ssize_t)(x >> 20) & (cap - 1);
}

static Req *table_get(Verifier *v, int64_t key) {
    Py_ssize_t i;
    if (v->cap == 0) return NULL;
    for (i = slot_of(key, v->cap);; i = (i + 1) & (v->cap - 1)) {
        if (v->slots[i].key == key) return v->slots[i].val;
        if (v->slots[i].key == 0) return NULL;
    }
}

static int table_grow(Verifier *v) {
    Py_ssize_t newcap = v->cap ? v->cap * 2 : 1024, i;
    Slot *old = v->slots, *slots;
    Py_ssize_t oldcap = v->cap;
    while (v->used * 2 >= newcap) newcap *= 2;
    if (v->used * 4 < oldcap && oldcap > 1024) newcap = oldcap; /* mostly deleted: rehash in place size */
    slots = (Slot *)PyMem_RawCalloc((size_t)newcap, sizeof(Slot));
    if (slots == NULL) return 0;
    for (i = 0; i < oldcap; i++) {
        if (old[i].key > 0) {
            Py_ssize_t j = slot_of(old[i].key, newcap);
            while (slots[j].key != 0) j = (j + 1) & (newcap - 1);
            slots[j] = old[i];
        }
    }
    PyMem_RawFree(old);
    v->slots = slots;
    v->cap = newcap;
    v->filled = v->used;
    return 1;
}

static int table_put(Verifier *v, int64_t key, Req *val) {
    Py_ssize_t i;
    if ((v->filled + 1) * 10 >= v->cap * 7 && !table_grow(v)) return 0;
    for (i = slot_of(key, v->cap);; i = (i + 1) & (v->cap - 1)) {
        if (v->slots[i].key <= 0) {
            if (v->slots[i].key == 0) v->filled++;
            v->slots[i].key = key;
            v->slots[i].val = val;
            v->used++;
            return 1;
        }
    }
}

static void table_del(Verifier *v, int64_t key) {
    Py_ssize_t i;
    for (i = slot_of(key, v->cap);; i = (i + 1) & (v->cap - 1)) {
        if (v->slots[i].key == key) {
            v->slots[i].key = -1;
            v->slots[i].val = NULL;
            v->used--;
            return;
        }
        if (v->slots[i].key == 0) return;
    }
}

static uint8_t closed_status(Verifier *v, int64_t seq) {
    return seq < v->closed_cap ? v->closed[seq] : ST_NONE;
}

/* A request that became final: keep its status in one byte, drop the rest. */
static int close_request(Verifier *v, Req *r, uint8_t status) {
    if (r->seq >= v->closed_cap) {
        Py_ssize_t cap = v->closed_cap ? v->closed_cap : 1 << 16;
        uint8_t *closed;
        while (cap <= r->seq) cap *= 2;
        closed = (uint8_t *)PyMem_RawRealloc(v->closed, (size_t)cap);
        if (closed == NULL) return 0;
        memset(closed + v->closed_cap, 0, (size_t)(cap - v->closed_cap));
        v->closed = closed;
        v->closed_cap = cap;
    }
    v->closed[r->seq] = status;
    v->closed_counts[status]++;
    table_del(v, r->seq);
    req_free(r);
    return 1;
}

/* Requirements in force from now on (an interrupt's, an edit's), with no approval counted:
 * takes ownership of `reqs`. 0 when out of memory. */
static int tally_reset(Req *r, Reqs *reqs) {
    int64_t *counts = (int64_t *)PyMem_RawCalloc((size_t)(reqs->nq ? reqs->nq : 1), sizeof(int64_t));
    if (counts == NULL) { PyMem_RawFree(reqs); return 0; }
    PyMem_RawFree(r->reqs);
    PyMem_RawFree(r->counts);
    spanset_clear(&r->approvals);
    r->reqs = reqs;
    r->counts = counts;
    r->unmet = reqs->named;  /* every count is at least 1 */
    return 1;
}

/* Count an approval of the current digest by `who` (not counted yet): one step per quorum that
 * names `who`. 0 when out of memory. */
static int tally_add(Req *r, Span who) {
    Py_ssize_t i = index_find(r->reqs, who);
    if (!spanset_add(&r->approvals, who)) return 0;
    for (; i >= 0 && i < r->reqs->nindex && span_eq(r->reqs->index[i].name, who); i++) {
        Py_ssize_t q = r->reqs->index[i].q;
        if (++r->counts[q] == r->reqs->q[q].count) r->unmet--;
    }
    return 1;
}

/* Requirements.met_by over the approvals counted: every named quorum reached its count, and
 * the distinct approvers reach the largest count of the quorums that admit anyone. */
static inline int tally_met(const Req *r) {
    return r->unmet == 0 && (int64_t)r->approvals.n >= r->reqs->anyone_needed;
}

/* ---- one event ------------------------------------------------------------------------------ */
typedef struct Event {
    int kind;
    int version;     /* a genesis: 1 or 2 (its format) */
    int pinned;      /* a policy event with `files`: its data holds the policy's text (section 11.5) */
    int64_t seq, request;
    Ptr hash, ts, prev, digest, replaces, deadline, context_digest;
    Ptr result_digest; /* an executed event's, NULL when null */
    Span who, proposer;
    int effect;
    Reqs reqs;       /* valid only in the phase that parsed it (it points into a Scratch) */
    Span reqs_raw;   /* the requirements' bytes, parsed again by the sequential phase */
} Event;

/* A policy event's optional last member (section 11.5): `,"files":[{"path":str,"sha256":hex}...]`,
 * at least one file. Sets *pinned when it is there. The files' text beside the body is not read
 * here: the driver (ledger/proof/fast.py) checks every such line with the reference's check. */
static int pinned_files(Cur *c, int *pinned) {
    Span s;
    Ptr ignored;
    if (!LIT(c, ",\"files\":[")) return 1;
    do {
        if (!LIT(c, "{\"path\":") || !str(c, &s) || !LIT(c, ",\"sha256\":") || !hex64(c, &ignored) || !LIT(c, "}")) return 0;
    } while (LIT(c, ","));
    *pinned = 1;
    return LIT(c, "]");
}

/* The members after `prev` (and `key`) of each kind, in order (section 3). */
static int body_members(Scratch *v, Cur *c, Event *e) {
    Span s;
    int is_null, x;
    Ptr ignored;
    switch (e->kind) {
    case K_GENESIS:
        /* Both versions open a ledger the same way. Of what version 2 adds, the `policy` event is
         * read here (and lawful only after a version 2 genesis: step); a decision's `signature`
         * and the `roster` event are declined and left to the reference. */
        if (!LIT(c, ",\"format\":\"countersign-ledger/")) return 0;
        if (LIT(c, "1")) e->version = 1;
        else if (LIT(c, "2")) e->version = 2;
        else return 0;
        return LIT(c, "\",\"ledger_id\":") && str(c, &s);
    case K_POLICY:
        /* docs/ledger-format.md 11.5: name str, digest hex, by str of at least one character
         * (one escape or one UTF-8 character: at least one byte between the quotes), source str?. */
        return LIT(c, ",\"name\":") && str(c, &s)
            && LIT(c, ",\"digest\":") && hex64(c, &ignored)
            && LIT(c, ",\"by\":") && str(c, &s) && s.n > 0
            && LIT(c, ",\"source\":") && str_or_null(c, &s, &is_null)
            && pinned_files(c, &e->pinned);
    case K_PROPOSED:
        return LIT(c, ",\"run\":") && str_or_null(c, &s, &is_null)
            && LIT(c, ",\"proposer\":") && str(c, &e->proposer)
            && LIT(c, ",\"call_id\":") && str_or_null(c, &s, &is_null)
            && LIT(c, ",\"tool\":") && str(c, &s)
            && LIT(c, ",\"args_digest\":") && hex64(c, &e->digest)
            && LIT(c, ",\"context_digest\":") && hex64(c, &e->context_digest)
            && LIT(c, ",\"policy\":") && str(c, &s)
            && LIT(c, ",\"policy_digest\":") && hex64(c, &ignored)
            && LIT(c, ",\"effect\":") && effect(c, &e->effect)
            && LIT(c, ",\"rules\":") && rules(c)
            && LIT(c, ",\"reasons\":") && str_list(c);
    }
    if (!LIT(c, ",\"request\":") || !uint_(c, &e->request) || e->request < 1) return 0;
    switch (e->kind) {
    case K_INTERRUPTED:
        return LIT(c, ",\"requirements\":") && requirements(v, c, &e->reqs, &e->reqs_raw)
            && LIT(c, ",\"deadline\":") && ts(c, &e->deadline);
    case K_APPROVED:
        return LIT(c, ",\"approver\":") && str(c, &e->who)
            && LIT(c, ",\"args_digest\":") && hex64(c, &e->digest)
            && LIT(c, ",\"comment\":") && str_or_null(c, &s, &is_null);
    case K_EDITED:
        return LIT(c, ",\"editor\":") && str(c, &e->who)
            && LIT(c, ",\"args_digest\":") && hex64(c, &e->digest)
            && LIT(c, ",\"replaces\":") && hex64(c, &e->replaces)
            && LIT(c, ",\"policy_digest\":") && hex64(c, &ignored)
            && LIT(c, ",\"effect\":") && effect(c, &e->effect)
            && LIT(c, ",\"rules\":") && rules(c)
            && LIT(c, ",\"requirements\":") && requirements(v, c, &e->reqs, &e->reqs_raw)
            && LIT(c, ",\"reason\":") && str_or_null(c, &s, &is_null);
    case K_REJECTED:
        return LIT(c, ",\"approver\":") && str(c, &e->who) && LIT(c, ",\"reason\":") && str(c, &s);
    case K_RESPONDED:
        return LIT(c, ",\"approver\":") && str(c, &e->who) && LIT(c, ",\"message\":") && str(c, &s);
    case K_EXPIRED:
        return LIT(c, ",\"outcome\":\"reject\",\"message\":") && str_or_null(c, &s, &is_null);
    case K_CANCELLED:
        return LIT(c, ",\"by\":") && str(c, &e->who) && LIT(c, ",\"reason\":") && str_or_null(c, &s, &is_null);
    case K_EXEC_STARTED:
        return LIT(c, ",\"args_digest\":") && hex64(c, &e->digest)
            && LIT(c, ",\"executor\":") && str_or_null(c, &s, &is_null);
    case K_EXECUTED:
        x = LIT(c, ",\"args_digest\":") && hex64(c, &e->digest) && LIT(c, ",\"outcome\":");
        if (!x) return 0;
        if (!LIT(c, "\"ok\"") && !LIT(c, "\"error\"")) return 0;
        if (!LIT(c, ",\"result_digest\":")) return 0;
        if (!LIT(c, "null") && !hex64(c, &e->result_digest)) return 0;
        return LIT(c, ",\"error\":") && str_or_null(c, &s, &is_null);
    }
    return 0;
}

static const struct { const char *name; size_t n; int kind; } KINDS[] = {
    {"\"genesis\"", 9, K_GENESIS},
    {"\"proposed\"", 10, K_PROPOSED},
    {"\"interrupted\"", 13, K_INTERRUPTED},
    {"\"approved\"", 10, K_APPROVED},
    {"\"edited\"", 8, K_EDITED},
    {"\"rejected\"", 10, K_REJECTED},
    {"\"responded\"", 11, K_RESPONDED},
    {"\"expired\"", 9, K_EXPIRED},
    {"\"cancelled\"", 11, K_CANCELLED},
    {"\"execution_started\"", 19, K_EXEC_STARTED},
    {"\"executed\"", 10, K_EXECUTED},
    {"\"policy\"", 8, K_POLICY},
};

/* The whole body: `{"kind":K,"seq":N,"ts":T,"prev":P[,"key":S]<members>}`; `c` is left just
after its closing brace. */
static int body(Scratch *v, Cur *c, Event *e) {
    size_t k;
    Span key;
    Py_ssize_t chars;
    if (!LIT(c, "{\"kind\":")) return 0;
    e->kind = -1;
    for (k = 0; k < sizeof(KINDS) / sizeof(KINDS[0]); k++) {
        if (lit(c, KINDS[k].name, KINDS[k].n)) { e->kind = KINDS[k].kind; break; }
    }
    if (e->kind < 0) return 0; /* recovered, redacted, roster or unknown: the reference's to judge */
    if (!LIT(c, ",\"seq\":") || !uint_(c, &e->seq) || !LIT(c, ",\"ts\":") || !ts(c, &e->ts)) return 0;
    if (!LIT(c, ",\"prev\":") || !hex64(c, &e->prev)) return 0;
    if (LIT(c, ",\"key\":")) {
        /* Key: 1 to 256 characters. */
        if (!scan_str(c, NULL, &key, &chars, NULL) || chars < 1 || chars > 256) return 0;
    }
    if (!body_members(v, c, e)) return 0;
    return LIT(c, "}");
}

/* The data beside the body (section 5). */
static int data(Cur *c, const Event *e) {
    unsigned char d[32];
    if (e->kind == K_EXECUTED && e->result_digest != NULL && c->p < c->end && *c->p == '{') {
        /* a kept result (section 5): {"result":VALUE}, VALUE's digest the body's result_digest */
        if (!LIT(c, "{\"result\":") || !value_digest(c, 0, d) || !digest_is(d, e->result_digest)) return 0;
        return LIT(c, "}") && c->p == c->end;
    }
    if (e->kind == K_POLICY && e->pinned) { /* checked by the driver (see pinned_files) */
        c->p = c->end;
        return 1;
    }
    if (e->kind != K_PROPOSED && e->kind != K_EDITED) return LIT(c, "null") && c->p == c->end;
    if (!LIT(c, "{\"args\":") || c->p >= c->end || *c->p != '{') return 0;
    if (!value_digest(c, 0, d) || !digest_is(d, e->digest)) return 0;
    if (e->kind == K_PROPOSED) {
        if (!LIT(c, ",\"context\":") || !value_digest(c, 0, d) || !digest_is(d, e->context_digest)) return 0;
    }
    return LIT(c, "}") && c->p == c->end;
}

/* ---- the workflow rules (ledger/workflow/machine.py: check, then apply) ------------------------- */
/* A decision's common conditions (Workflow._decider). */
static int decider(const Req *r, Span who, unsigned decision, Ptr when) {
    if (r->status != ST_PENDING || r->reqs == NULL || !r->has_deadline) return 0;
    if (!(r->reqs->decisions & decision)) return 0;
    if (who.n == r->proposer_n && memcmp(who.s, r->proposer, (size_t)who.n) == 0) return 0;
    if (!reqs_allows(r->reqs, who)) return 0;
    return memcmp(when, r->deadline, 27) < 0;
}

/* 1: lawful and applied; 0: unlawful or out of memory (declined either way). */
static int step(Verifier *v, const Event *e, const Reqs *reqs) {
    Req *r;
    if (e->kind == K_GENESIS) { /* only at seq 1, checked before */
        v->version2 = e->version == 2;
        return 1;
    }
    if (e->kind == K_POLICY) return v->version2; /* about the log; version 2 only (format-version) */
    if (e->kind == K_PROPOSED) {
        uint8_t status = e->effect == EFF_ALLOW ? ST_ALLOWED : e->effect == EFF_ASK ? ST_INTERRUPTING : ST_DENIED;
        if (table_get(v, e->seq) != NULL || closed_status(v, e->seq) != ST_NONE) return 0; /* cannot happen: seqs grow */
        r = (Req *)PyMem_RawCalloc(1, sizeof(Req));
        if (r == NULL) return 0;
        r->seq = e->seq;
        r->status = status;
        memcpy(r->digest, e->digest, 64);
        r->proposer = (unsigned char *)PyMem_RawMalloc(e->proposer.n ? (size_t)e->proposer.n : 1);
        if (r->proposer == NULL) { PyMem_RawFree(r); return 0; }
        memcpy(r->proposer, e->proposer.s, (size_t)e->proposer.n);
        r->proposer_n = e->proposer.n;
        if (!table_put(v, e->seq, r)) { req_free(r); return 0; }
        if (status == ST_DENIED) return close_request(v, r, ST_DENIED);
        return 1;
    }
    r = table_get(v, e->request);
    if (r == NULL) return 0; /* never proposed, or already final */
    switch (e->kind) {
    case K_INTERRUPTED:
        if (r->status != ST_INTERRUPTING) return 0;
        {
            Reqs *fresh = reqs_copy(reqs, e->reqs_raw);
            if (fresh == NULL || !tally_reset(r, fresh)) return 0;
        }
        memcpy(r->deadline, e->deadline, 27);
        r->has_deadline = 1;
        r->status = ST_PENDING;
        return 1;
    case K_APPROVED:
        if (!decider(r, e->who, D_APPROVE, e->ts)) return 0;
        if (memcmp(e->digest, r->digest, 64) != 0 || spanset_has(&r->approvals, e->who)) return 0;
        if (!tally_add(r, e->who)) return 0;
        if (tally_met(r)) r->status = ST_APPROVED;
        return 1;
    case K_EDITED: {
        Reqs *fresh;
        if (!decider(r, e->who, D_EDIT, e->ts)) return 0;
        if (memcmp(e->replaces, r->digest, 64) != 0 || e->effect == EFF_DENY) return 0;
        /* The edit's requirements govern; it counts as the editor's approval of the new digest
         * when they admit the editor, and approvals of earlier digests stop counting. */
        fresh = reqs_copy(reqs, e->reqs_raw);
        if (fresh == NULL || !tally_reset(r, fresh)) return 0;
        memcpy(r->digest, e->digest, 64);
        if (reqs_allows(r->reqs, e->who) && !tally_add(r, e->who)) return 0;
        if (tally_met(r)) r->status = ST_APPROVED;
        return 1;
    }
    case K_REJECTED:
        return decider(r, e->who, D_REJECT, e->ts) && close_request(v, r, ST_REJECTED);
    case K_RESPONDED:
        return decider(r, e->who, D_RESPOND, e->ts) && close_request(v, r, ST_RESPONDED);
    case K_EXPIRED:
        if (r->status != ST_PENDING || !r->has_deadline || memcmp(e->ts, r->deadline, 27) < 0) return 0;
        return close_request(v, r, ST_EXPIRED);
    case K_CANCELLED:
        if (r->status == ST_EXECUTING) return 0;
        return close_request(v, r, ST_CANCELLED);
    case K_EXEC_STARTED:
        if (r->status != ST_ALLOWED && r->status != ST_APPROVED) return 0;
        if (memcmp(e->digest, r->digest, 64) != 0) return 0;
        r->status = ST_EXECUTING;
        return 1;
    case K_EXECUTED:
        if (r->status != ST_EXECUTING || memcmp(e->digest, r->digest, 64) != 0) return 0;
        return close_request(v, r, ST_EXECUTED);
    }
    return 0;
}

/* ---- one line ---------------------------------------------------------------------------- */
/* The checks that need no state (they run on two threads): the layout of section 2, the body,
 * its hash, the data and its digests. The body is parsed from byte 8 to its closing brace, which
 * must be followed by `,"hash":"`: that is then the first occurrence of those bytes (section 2),
 * since a canonical body has no member named hash and every quote inside its strings escaped. */
static int check_line(Scratch *s, Ptr p, Ptr end, Event *e) {
    Ptr hash;
    Cur c;
    SHA256_CTX h;
    unsigned char digest[32];
    memset(e, 0, sizeof *e);
    if (end - p < 8 + 9 + 64 + 9 + 1 || memcmp(p, "{\"body\":", 8) != 0) return 0;
    c.p = p + 8;
    c.end = end;
    if (!body(s, &c, e) || !LIT(&c, ",\"hash\":\"")) return 0;
    hash = c.p;
    if (end - hash < 64 + 9 + 1 || memcmp(hash + 64, "\",\"data\":", 9) != 0 || end[-1] != '}') return 0;
    SHA256_Init(&h);
    SHA256_Update(&h, p + 8, (size_t)(hash - 9 - (p + 8)));
    SHA256_Final(digest, &h);
    if (!digest_is(digest, hash)) return 0;
    e->hash = hash;
    c.p = hash + 64 + 9;
    c.end = end - 1;
    return data(&c, e);
}

/* The checks in order (one thread): seq, prev, time, the genesis, the workflow. */
static int chain_line(Verifier *v, const Event *e) {
    Reqs reqs;
    if (e->seq != v->expected || memcmp(e->prev, v->prev, 64) != 0) return 0;
    if (v->has_prev_ts && memcmp(e->ts, v->prev_ts, 27) < 0) return 0;
    if ((e->seq == 1) != (e->kind == K_GENESIS)) return 0;
    if (e->kind == K_INTERRUPTED || e->kind == K_EDITED) {
        Span raw;
        Cur c = {e->reqs_raw.s, e->reqs_raw.s + e->reqs_raw.n};
        if (!requirements(&v->scratch, &c, &reqs, &raw)) return 0;
    }
    if (!step(v, e, &reqs)) return 0;
    memcpy(v->prev, e->hash, 64);
    memcpy(v->prev_ts, e->ts, 27);
    v->has_prev_ts = 1;
    if (v->expect_head_set && memcmp(e->hash, v->expect_head, 64) == 0) v->head_seen_at = e->seq;
    v->expected++;
    return 1;
}

typedef struct {
    Ptr *starts, *ends;
    Event *events;        /* one per line, kept for the sequential checks; NULL: one reused (check_lines) */
    unsigned char *flags; /* NULL: stop at the first line that fails; else each line's result (check_lines) */
    Py_ssize_t from, to;
    int ok;               /* 0: a line failed (without flags) or no memory */
} Job;

static void *run_job(void *arg) {
    Job *job = (Job *)arg;
    Scratch *s = (Scratch *)PyMem_RawMalloc(sizeof(Scratch));
    Event one;
    Py_ssize_t i;
    job->ok = s != NULL;
    for (i = job->from; job->ok && i < job->to; i++) {
        Event *e = job->events != NULL ? &job->events[i] : &one;
        int good = check_line(s, job->starts[i], job->ends[i], e);
        if (job->flags != NULL) job->flags[i] = good && !e->pinned;  /* a pinned policy's text is the caller's */
        else job->ok = good;
    }
    PyMem_RawFree(s);
    return NULL;
}

/* run_job over lines [0, n): half on a second thread when `threads` > 1 and there are 256 lines or
 * more. Returns whether both halves ended ok. */
static int run_jobs(Ptr *starts, Ptr *ends, Event *events, unsigned char *flags, Py_ssize_t n, int threads) {
    Job jobs[2];
    pthread_t worker;
    int spawned = 0, i;
    for (i = 0; i < 2; i++) {
        jobs[i].starts = starts;
        jobs[i].ends = ends;
        jobs[i].events = events;
        jobs[i].flags = flags;
    }
    jobs[0].from = 0;
    jobs[0].to = threads > 1 && n >= 256 ? n / 2 : n;
    jobs[1].from = jobs[0].to;
    jobs[1].to = n;
    jobs[1].ok = 1;
    if (jobs[1].from < jobs[1].to) {
        spawned = pthread_create(&worker, NULL, run_job, &jobs[1]) == 0;
        if (!spawned) jobs[0].to = n;
    }
    run_job(&jobs[0]);
    if (spawned) pthread_join(worker, NULL);
    return jobs[0].ok && jobs[1].ok;
}

/* All whole lines of [p, end): the stateless checks split over the threads, then the sequential
 * ones. Returns the end of the last whole line, or NULL to decline. */
#define BATCH_LINES 16384  /* lines indexed at a time: bounds the index whatever the lines' lengths */

static Ptr batch(Verifier *v, Ptr p, Ptr end, int *more);

static Ptr lines(Verifier *v, Ptr p, Ptr end) {
    int more = 1;
    while (more && p != NULL) p = batch(v, p, end, &more);
    return p;
}

/* Up to BATCH_LINES whole lines from p; `more` says whether the batch was full. */
static Ptr batch(Verifier *v, Ptr p, Ptr end, int *more) {
    Py_ssize_t n = 0, i;
    Ptr nl;
    *more = 0;
    while (p < end && (nl = (Ptr)memchr(p, '\n', (size_t)(end - p))) != NULL) {
        if (n == v->lines_cap) {
            Py_ssize_t cap = v->lines_cap ? v->lines_cap * 2 : 4096;
            Ptr *starts = (Ptr *)PyMem_RawRealloc(v->starts, (size_t)cap * sizeof(Ptr));
            Ptr *ends = starts ? (Ptr *)PyMem_RawRealloc(v->ends, (size_t)cap * sizeof(Ptr)) : NULL;
            Event *events = ends ? (Event *)PyMem_RawRealloc(v->events, (size_t)cap * sizeof(Event)) : NULL;
            if (starts) v->starts = starts;
            if (ends) v->ends = ends;
            if (events) v->events = events;
            if (events == NULL) return NULL;
            v->lines_cap = cap;
        }
        if (nl - p > MAX_LINE_BYTES) return NULL;  /* over the limit: the reference reports it */
        v->starts[n] = p;
        v->ends[n] = nl;
        n++;
        p = nl + 1;
        if (n == BATCH_LINES) {
            *more = 1;
            break;
        }
    }
    if (!run_jobs(v->starts, v->ends, v->events, NULL, n, v->threads)) return NULL;
    for (i = 0; i < n; i++)
        if (!chain_line(v, &v->events[i])) return NULL;
    return p;
}

/* ---- the Python type ------------------------------------------------------------------------ */
static int Verifier_init(Verifier *v, PyObject *args, PyObject *kwds) {
    static char *names[] = {"expect_head", "threads", NULL};
    PyObject *head = Py_None;
    int threads = 2;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|Oi", names, &head, &threads)) return -1;
    if (v->initialized) {
        PyErr_SetString(PyExc_RuntimeError, "a Verifier is initialized once; make a new one");
        return -1;
    }
    v->threads = threads > 1 ? 2 : 1;
    v->expected = 1;
    memset(v->prev, '0', 64);
    v->head_seen_at = 0;
    v->expect_head_set = 0;
    if (head != Py_None) {
        Py_ssize_t n;
        const char *text;
        if (!PyUnicode_Check(head)) {
            PyErr_SetString(PyExc_TypeError, "expect_head must be a str or None");
            return -1;
        }
        text = PyUnicode_AsUTF8AndSize(head, &n);
        if (text == NULL) return -1;
        v->expect_head_set = 1;
        if (n == 64) memcpy(v->expect_head, text, 64);
        else memset(v->expect_head, 0, 64); /* matches no hash */
    }
    v->initialized = 1;
    return 0;
}

static void Verifier_dealloc(Verifier *v) {
    Py_ssize_t i;
    for (i = 0; i < v->cap; i++)
        if (v->slots[i].key > 0) req_free(v->slots[i].val);
    PyMem_RawFree(v->slots);
    PyMem_RawFree(v->closed);
    PyMem_RawFree(v->starts);
    PyMem_RawFree(v->ends);
    PyMem_RawFree(v->events);
    Py_TYPE(v)->tp_free((PyObject *)v);
}

PyDoc_STRVAR(feed_doc,
"feed(buffer) -> int\n\n"
"Check the whole lines at the start of `buffer` (bytes of one segment, in order). Returns how many\n"
"bytes they take (the rest is an unfinished line, to be fed again with what follows), or -1 when\n"
"the verifier declines: something is wrong, or is left to the reference verifier. After -1 it\n"
"declines everything.");

static PyObject *Verifier_feed(Verifier *v, PyObject *arg) {
    Py_buffer view;
    Ptr p, end;
    Py_ssize_t used;
    int ok = 1;
    if (!v->initialized || v->busy) {
        PyErr_SetString(PyExc_RuntimeError, v->busy ? "feed() is already running on this Verifier" : "the Verifier was not initialized");
        return NULL;
    }
    if (v->declined) return PyLong_FromLong(-1);
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    v->busy = 1;
    p = (Ptr)view.buf;
    end = p + view.len;
    Py_BEGIN_ALLOW_THREADS
    p = lines(v, p, end);
    Py_END_ALLOW_THREADS
    v->busy = 0;
    ok = p != NULL;
    used = ok ? p - (Ptr)view.buf : -1;
    PyBuffer_Release(&view);
    if (!ok) {
        v->declined = 1;
        return PyLong_FromLong(-1);
    }
    return PyLong_FromSsize_t(used);
}

static int cmp_seq(const void *a, const void *b) {
    int64_t x = (*(Req *const *)a)->seq, y = (*(Req *const *)b)->seq;
    return x < y ? -1 : x > y;
}

PyDoc_STRVAR(finish_doc,
"finish() -> (count, head, head_seen_at, open, closed) or None\n\n"
"After the last line: the number of events, the head hash, the seq of the expected head (None when\n"
"not seen or not asked), the open requests as (seq, status) in seq order, and (status, count) of\n"
"the final statuses in ledger/workflow/machine.py's FINAL order. None when it declined or saw no event.");

static PyObject *Verifier_finish(Verifier *v, PyObject *Py_UNUSED(ignored)) {
    Req **open;
    Py_ssize_t i, n = 0;
    PyObject *opens, *closed, *result;
    if (v->busy) {
        PyErr_SetString(PyExc_RuntimeError, "feed() is running on this Verifier");
        return NULL;
    }
    if (!v->initialized || v->declined || v->expected == 1) Py_RETURN_NONE;
    open = (Req **)PyMem_RawMalloc((size_t)(v->used ? v->used : 1) * sizeof(Req *));
    if (open == NULL) return PyErr_NoMemory();
    for (i = 0; i < v->cap; i++)
        if (v->slots[i].key > 0) open[n++] = v->slots[i].val;
    qsort(open, (size_t)n, sizeof(Req *), cmp_seq);
    opens = PyList_New(n);
    if (opens == NULL) { PyMem_RawFree(open); return NULL; }
    for (i = 0; i < n; i++) {
        PyObject *item = Py_BuildValue("(Ls)", (long long)open[i]->seq, STATUS_NAMES[open[i]->status]);
        if (item == NULL) { PyMem_RawFree(open); Py_DECREF(opens); return NULL; }
        PyList_SET_ITEM(opens, i, item);
    }
    PyMem_RawFree(open);
    closed = PyList_New(0);
    if (closed == NULL) { Py_DECREF(opens); return NULL; }
    for (i = ST_DENIED; i <= ST_EXECUTED; i++) {
        PyObject *item = Py_BuildValue("(sL)", STATUS_NAMES[i], (long long)v->closed_counts[i]);
        if (item == NULL || PyList_Append(closed, item) < 0) { Py_XDECREF(item); Py_DECREF(opens); Py_DECREF(closed); return NULL; }
        Py_DECREF(item);
    }
    {
        PyObject *seen = v->head_seen_at ? PyLong_FromLongLong((long long)v->head_seen_at) : Py_NewRef(Py_None);
        result = Py_BuildValue("(Ls#NNN)", (long long)(v->expected - 1), (const char *)v->prev, (Py_ssize_t)64, seen, opens, closed);
    }
    return result;
}

PyDoc_STRVAR(valid_body_doc,
"valid_body(body) -> bool\n\n"
"True when `body` (bytes) is an event body of a kind this module reads, in its one canonical layout,\n"
"with the types and values docs/ledger-format.md section 3 allows and real times: then\n"
"ledger.events.decode_event accepts it too. False says nothing more than that this module is unsure;\n"
"the writer then asks decode_event.");

static PyObject *valid_body(PyObject *Py_UNUSED(module), PyObject *arg) {
    Py_buffer view;
    Scratch scratch;
    Event e;
    Cur c;
    int ok;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    memset(&e, 0, sizeof e);
    c.p = (Ptr)view.buf;
    c.end = c.p + view.len;
    ok = body(&scratch, &c, &e) && c.p == c.end;
    PyBuffer_Release(&view);
    return PyBool_FromLong(ok);
}

PyDoc_STRVAR(seal_doc,
"seal(body, data) -> (hash, line) or None\n\n"
"For a body that valid_body() accepts and the data bytes beside it (b\"null\" for none): the body's\n"
"SHA-256 in lowercase hex (str) and the whole ledger line, line feed included:\n"
"{\"body\":BODY,\"hash\":\"HASH\",\"data\":DATA}\\n (docs/ledger-format.md, section 2). None when\n"
"valid_body() would say False; the caller then checks and composes the line itself. Raises\n"
"ValueError when the line would be longer than MAX_LINE_BYTES (its line feed not counted).");

static PyObject *seal(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer b, d;
    Scratch scratch;
    Event e;
    Cur c;
    SHA256_CTX h;
    unsigned char digest[32], hex[64];
    PyObject *line = NULL, *hash = NULL, *result = NULL;
    char *out;
    int i;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "seal() takes the body and the data");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &b, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &d, PyBUF_SIMPLE) < 0) { PyBuffer_Release(&b); return NULL; }
    if (b.len > MAX_LINE_BYTES || d.len > MAX_LINE_BYTES || b.len + d.len + LINE_OVERHEAD > MAX_LINE_BYTES) {
        PyErr_Format(PyExc_ValueError, "a ledger line is at most %d bytes; this one would be %zd",
                     MAX_LINE_BYTES, b.len + d.len + (Py_ssize_t)LINE_OVERHEAD);
        goto done;
    }
    memset(&e, 0, sizeof e);
    c.p = (Ptr)b.buf;
    c.end = c.p + b.len;
    if (!(body(&scratch, &c, &e) && c.p == c.end)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    SHA256_Init(&h);
    SHA256_Update(&h, b.buf, (size_t)b.len);
    SHA256_Final(digest, &h);
    for (i = 0; i < 32; i++) {
        hex[2 * i] = (unsigned char)HEX[digest[i] >> 4];
        hex[2 * i + 1] = (unsigned char)HEX[digest[i] & 15];
    }
    line = PyBytes_FromStringAndSize(NULL, 8 + b.len + 9 + 64 + 9 + d.len + 2);
    hash = PyUnicode_FromStringAndSize((const char *)hex, 64);
    if (line == NULL || hash == NULL) goto done;
    out = PyBytes_AS_STRING(line);
    memcpy(out, "{\"body\":", 8); out += 8;
    memcpy(out, b.buf, (size_t)b.len); out += b.len;
    memcpy(out, ",\"hash\":\"", 9); out += 9;
    memcpy(out, hex, 64); out += 64;
    memcpy(out, "\",\"data\":", 9); out += 9;
    memcpy(out, d.buf, (size_t)d.len); out += d.len;
    memcpy(out, "}\n", 2);
    result = PyTuple_Pack(2, hash, line);
done:
    Py_XDECREF(line);
    Py_XDECREF(hash);
    PyBuffer_Release(&b);
    PyBuffer_Release(&d);
    return result;
}

PyDoc_STRVAR(check_lines_doc,
"check_lines(buffer) -> bytes\n\n"
"The checks of each whole line of `buffer` (bytes ending in a line feed) that need no earlier line:\n"
"the layout, the body in its one canonical layout with its types and real times, the hash as the\n"
"body's SHA-256, and the data beside it against the body's digests in its canonical spelling\n"
"(docs/ledger-format.md, sections 2 to 5). One byte per line feed: 1 when the line passes all of\n"
"them, 0 when this module is unsure (anything Verifier.feed declines, and a policy event that pins\n"
"its text, whose data is the caller's to check); the caller then checks that line itself. Seq, prev,\n"
"time order and the workflow are not checked: they depend on the lines before. Bytes after the last\n"
"line feed are ignored. Runs on two threads, without the GIL.");

static PyObject *check_lines(PyObject *Py_UNUSED(module), PyObject *arg) {
    Py_buffer view;
    Ptr p, end, nl;
    Py_ssize_t n = 0, cap = 0;
    Ptr *starts = NULL, *ends = NULL;
    unsigned char *flags = NULL;
    int ok = 1;
    PyObject *result = NULL;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    p = (Ptr)view.buf;
    end = p + view.len;
    Py_BEGIN_ALLOW_THREADS
    while (ok && p < end && (nl = (Ptr)memchr(p, '\n', (size_t)(end - p))) != NULL) {
        if (n == cap) {
            Py_ssize_t more = cap ? cap * 2 : 4096;
            Ptr *s2 = (Ptr *)PyMem_RawRealloc(starts, (size_t)more * sizeof(Ptr));
            Ptr *e2 = s2 ? (Ptr *)PyMem_RawRealloc(ends, (size_t)more * sizeof(Ptr)) : NULL;
            if (s2) starts = s2;
            if (e2) ends = e2;
            ok = e2 != NULL;
            if (!ok) break;
            cap = more;
        }
        starts[n] = p;
        ends[n] = nl - p > MAX_LINE_BYTES ? p : nl;  /* over the limit: an empty span, which check_line fails */
        n++;
        p = nl + 1;
    }
    if (ok) {
        flags = (unsigned char *)PyMem_RawMalloc((size_t)(n ? n : 1));
        ok = flags != NULL;
    }
    if (ok) ok = run_jobs(starts, ends, NULL, flags, n, 2);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (ok) result = PyBytes_FromStringAndSize((const char *)flags, n);
    else PyErr_NoMemory();
    PyMem_RawFree(starts);
    PyMem_RawFree(ends);
    PyMem_RawFree(flags);
    return result;
}

PyDoc_STRVAR(chunk_lines_doc,
"chunk_lines(buffer, flags, first_position, segment_file, first_line, first_offset) -> (bytes, longest)\n\n"
"Each whole line of `buffer` (bytes of one segment starting at byte `first_offset`, ending in a line\n"
"feed) that `flags` (check_lines(buffer)) passes, with its place in front, as the columnar projection\n"
"inserts it (ledger/analytics/schema.py,\n"
"event_rows_select): {\"position\":P,\"segment_file\":F,\"line\":L,\"file_offset\":O,\"data_sha256\":S,\n"
"followed by the line after its opening brace, and a line feed. P counts from `first_position`, L\n"
"from `first_line`, counting every line; O is the line's first byte in the segment; S is null when\n"
"the data beside the body is null, else the first 32 hex digits of its SHA-256 in quotes. A line\n"
"flagged 0 gets no row (the caller composes it if it takes the line): so every row holds a line in\n"
"the ledger's layout, a canonical body and canonical data, whose members cannot shadow the place in\n"
"front. `longest` is the length of the longest row composed, its line feed counted.\n"
"`segment_file` (str) must need no escaping in JSON.");

static PyObject *chunk_lines(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view, flags;
    Py_ssize_t index = 0;
    long long position, line, offset;
    const char *name;
    Py_ssize_t name_n, n = 0, size, longest = 0;
    Ptr p, end, nl;
    PyObject *result, *pair;
    char *out, *start;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "chunk_lines() takes the buffer, its flags, first position, segment file, first line and first offset");
        return NULL;
    }
    position = PyLong_AsLongLong(args[2]);
    line = PyLong_AsLongLong(args[4]);
    offset = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred()) return NULL;
    name = PyUnicode_AsUTF8AndSize(args[3], &name_n);
    if (name == NULL) return NULL;
    if (PyObject_GetBuffer(args[1], &flags, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) { PyBuffer_Release(&flags); return NULL; }
    p = (Ptr)view.buf;
    end = p + view.len;
    for (Ptr q = p; q < end && (nl = (Ptr)memchr(q, '\n', (size_t)(end - q))) != NULL; q = nl + 1) n++;
    /* per line: the prefix's fixed text (78), three numbers (20 each), the name, a fingerprint (34) */
    size = view.len + n * (78 + 60 + name_n + 34);
    if (flags.len != n) {
        PyBuffer_Release(&view);
        PyBuffer_Release(&flags);
        PyErr_SetString(PyExc_ValueError, "chunk_lines() needs one flag per whole line of the buffer");
        return NULL;
    }
    result = PyBytes_FromStringAndSize(NULL, size);
    if (result == NULL) { PyBuffer_Release(&view); PyBuffer_Release(&flags); return NULL; }
    out = start = PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    while (p < end && (nl = (Ptr)memchr(p, '\n', (size_t)(end - p))) != NULL) {
        Ptr hash = NULL, q;
        char *first = out;
        int written;
        if (!((const unsigned char *)flags.buf)[index++]) {  /* not checked: no row */
            position++;
            line++;
            p = nl + 1;
            continue;
        }
        /* the hash mark after the body: the first `,"hash":"` (a string's quotes are escaped) */
        for (q = p + 8; q + 9 <= nl; q++) {
            q = (Ptr)memchr(q, ',', (size_t)(nl - q));
            if (q == NULL) break;
            if (nl - q >= 9 && memcmp(q, ",\"hash\":\"", 9) == 0) { hash = q + 9; break; }
        }
        written = sprintf(out, "{\"position\":%lld,\"segment_file\":\"%s\",\"line\":%lld,\"file_offset\":%lld,\"data_sha256\":",
                          position, name, line, offset + (long long)(p - (Ptr)view.buf));
        out += written;
        if (hash != NULL && nl - hash >= 64 + 9 + 1 && memcmp(hash + 64, "\",\"data\":", 9) == 0 && nl[-1] == '}'
            && !(nl - 1 - (hash + 73) == 4 && memcmp(hash + 73, "null", 4) == 0)) {
            unsigned char digest[32];
            int i;
            SHA256(hash + 73, (size_t)(nl - 1 - (hash + 73)), digest);
            *out++ = '"';
            for (i = 0; i < 16; i++) {
                *out++ = HEX[digest[i] >> 4];
                *out++ = HEX[digest[i] & 15];
            }
            *out++ = '"';
        } else {
            memcpy(out, "null", 4);
            out += 4;
        }
        *out++ = ',';
        if (nl - p > 1) {
            memcpy(out, p + 1, (size_t)(nl - p - 1));
            out += nl - p - 1;
        }
        *out++ = '\n';
        if (out - first > longest) longest = out - first;
        position++;
        line++;
        p = nl + 1;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&flags);
    if (_PyBytes_Resize(&result, out - start) < 0) return NULL;
    pair = Py_BuildValue("(Nn)", result, longest);
    return pair;
}

static PyMethodDef module_methods[] = {
    {"valid_body", valid_body, METH_O, valid_body_doc},
    {"seal", (PyCFunction)(void (*)(void))seal, METH_FASTCALL, seal_doc},
    {"check_lines", check_lines, METH_O, check_lines_doc},
    {"chunk_lines", (PyCFunction)(void (*)(void))chunk_lines, METH_FASTCALL, chunk_lines_doc},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef Verifier_methods[] = {
    {"feed", (PyCFunction)Verifier_feed, METH_O, feed_doc},
    {"finish", (PyCFunction)Verifier_finish, METH_NOARGS, finish_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(Verifier_doc,
"Verifier(expect_head=None)\n\n"
"Checks a ledger's lines, fed in order with feed(), and sums them up with finish(). See\n"
"ledger/store/native.py and the comment at the top of ledger/_native.c.");

static PyTypeObject VerifierType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ledger._native.Verifier",
    .tp_basicsize = sizeof(Verifier),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = Verifier_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Verifier_init,
    .tp_dealloc = (destructor)Verifier_dealloc,
    .tp_methods = Verifier_methods,
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "ledger._native", "countersign's compiled verifier (see ledger/store/native.py).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m;
    SHA256((const unsigned char *)"n", 1, D_NULL);
    SHA256((const unsigned char *)"b1", 2, D_TRUE);
    SHA256((const unsigned char *)"b0", 2, D_FALSE);
    if (PyType_Ready(&VerifierType) < 0) return NULL;
    m = PyModule_Create(&native_module);
    if (m == NULL) return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", COUNTERSIGN_SOURCE_SHA256) < 0) { Py_DECREF(m); return NULL; }
    if (PyModule_AddIntConstant(m, "MAX_LINE_BYTES", MAX_LINE_BYTES) < 0) { Py_DECREF(m); return NULL; }
    Py_INCREF(&VerifierType);
    if (PyModule_AddObject(m, "Verifier", (PyObject *)&VerifierType) < 0) { Py_DECREF(&VerifierType); Py_DECREF(m); return NULL; }
    return m;
}
