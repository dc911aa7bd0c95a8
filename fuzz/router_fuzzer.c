/* Fuzz target for the routing decision (src/route/router.c; spec 6, 7.1.2, 7.2).
 *
 * The input is decoded into a sequence of events the daemon feeds the
 * router: a worker starts, fails (malformed output: not running, sessions
 * invalidated, SB-5.3) or exits (SB-7.1.2), a client sends a line, a worker
 * sends a line, a client disconnects (SB-7.2), and bulk traffic that fills
 * the session and pending tables (SB-I-18). Client and worker lines are
 * built from a few decoded choices: id and sessionId from small sets
 * (strings, numbers, null, ids that differ only in spelling, wrong types,
 * over-long tokens), method, result/error, duplicate and escaped member
 * names, routing-looking members nested in params, blank lines, garbage.
 *
 * A reference model written here from the spec (sessions, both pending
 * tables, the round-robin cursor of SB-I-30 with the skip of SB-I-3)
 * predicts every decision, and after every step the router's tables are
 * walked and compared with the model. Any difference aborts. The invariants
 * this enforces, each also checked on its own:
 *   - a session's worker never changes while it exists (SB-6.1.2-2);
 *   - a session is owned by the client that created it (SB-6.1.1-3);
 *   - no session or pending entry refers to an exited worker or to a
 *     disconnected client (SB-7.1.2-3/4, SB-7.2-1/2);
 *   - a response goes only to a client that has that (worker, id) pending,
 *     at most once per request (SB-6.3.1, SB-I-3, SB-I-23);
 *   - TO_WORKER targets a running worker (SB-7.1.2-1, SB-I-12);
 *   - the tables' counts equal the model's;
 *   - a message from client A is never routed by a session of client B
 *     (SB-I-4).
 * Between inputs the router is brought back to its initial state (see
 * "Reusing routers" below).
 *
 * ROUTER_FUZZER_TRACE=1 prints every step and decision of an input. Build
 * with -DSB_FUZZ_ALLOW_CROSS_SESSION_MATCH to model sb_pending_take as it
 * was before the fix described at mp_take(). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bus_limits.h"
#include "router.h"
#include "status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fail_check(__LINE__, #cond);                                                           \
    } while (0)

static void fail_check(int line, const char *what) __attribute__((noreturn));

/* The model's table walks and the per-input reset are the harness's own
 * hot loops: left out of coverage feedback, they neither slow libFuzzer's
 * comparison tracing nor count as progress. */
#if defined(__clang__)
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define NO_COVERAGE
#endif

#define MAX_WORKERS  4
#define MAX_CLIENTS  8
#define MAX_OPS      1024
#define MAX_MESSAGES 20000 /* per input, bulk traffic included */
#define LINE_CAP     4096
#define ID_RAW_MAX   (STDIO_BUS_MAX_REQUEST_ID_LEN + 2)
#define SID_RAW_MAX  (STDIO_BUS_MAX_SESSION_ID_LEN + 2)
#define CAP_SESSIONS STDIO_BUS_MAX_SESSIONS
#define CAP_PENDING  STDIO_BUS_MAX_PENDING_REQUESTS
#define M_BUCKETS    8192 /* power of two */

/* ---- Tokens the lines are built from ---------------------------------- */

typedef struct {
    const char *raw;
    sb_json_type type;
} tok;

static char long_str_ok[ID_RAW_MAX + 1], long_str_bad[ID_RAW_MAX + 2];
static char long_num_ok[ID_RAW_MAX], long_num_bad[ID_RAW_MAX + 1];
static char long_sid_ok[SID_RAW_MAX + 1], long_sid_bad[SID_RAW_MAX + 2];

/* Ids: the first GOOD_IDS are routable; "a" and "\u0061" are two ids, as
 * are 1, 1.0 and "1" (SB-I-3). */
static const tok id_set[] = {
    {"1", SB_JSON_NUMBER},
    {"2", SB_JSON_NUMBER},
    {"\"1\"", SB_JSON_STRING},
    {"\"a\"", SB_JSON_STRING},
    {"null", SB_JSON_NULL},
    {"1.0", SB_JSON_NUMBER},
    {"-0", SB_JSON_NUMBER},
    {"\"\\u0061\"", SB_JSON_STRING},
    {"\"x\"", SB_JSON_STRING},
    {"0", SB_JSON_NUMBER},
    {"1e2", SB_JSON_NUMBER},
    {long_str_ok, SB_JSON_STRING},
    {long_num_ok, SB_JSON_NUMBER},
    /* malformed: too long, or of a type an id cannot have (SB-I-2) */
    {long_str_bad, SB_JSON_STRING},
    {long_num_bad, SB_JSON_NUMBER},
    {"true", SB_JSON_TRUE},
    {"false", SB_JSON_FALSE},
    {"{\"a\":1}", SB_JSON_OBJECT},
    {"[1]", SB_JSON_ARRAY},
};
#define GOOD_IDS 13
#define ALL_IDS  (sizeof id_set / sizeof *id_set)

static const tok sid_set[] = {
    {"\"s1\"", SB_JSON_STRING},  {"\"s2\"", SB_JSON_STRING},       {"\"s3\"", SB_JSON_STRING},
    {"\"\"", SB_JSON_STRING},    {"\"s\\u0031\"", SB_JSON_STRING}, /* not "s1" (SB-I-37) */
    {"\"S1\"", SB_JSON_STRING},  {long_sid_ok, SB_JSON_STRING},    {long_sid_bad, SB_JSON_STRING},
    {"1", SB_JSON_NUMBER},       {"null", SB_JSON_NULL},           {"{}", SB_JSON_OBJECT},
    {"[\"s1\"]", SB_JSON_ARRAY},
};
#define GOOD_SIDS 7
#define ALL_SIDS  (sizeof sid_set / sizeof *sid_set)

static const tok method_set[] = {
    {"\"m\"", SB_JSON_STRING}, {"\"tools/call\"", SB_JSON_STRING},
    {"\"\"", SB_JSON_STRING},  {"1", SB_JSON_NUMBER},
    {"null", SB_JSON_NULL},    {"[\"m\"]", SB_JSON_ARRAY},
};
#define GOOD_METHODS 3
#define ALL_METHODS  (sizeof method_set / sizeof *method_set)

static void tokens_init(void) {
    static bool ready;
    if (ready)
        return;
    ready = true;
    /* Strings of exactly the limit and one more (without quotes), numbers
     * of exactly the limit and one more digits (SB-8.2-4, SB-8.2-5). */
    int id_max = STDIO_BUS_MAX_REQUEST_ID_LEN, sid_max = STDIO_BUS_MAX_SESSION_ID_LEN;
    snprintf(long_str_ok, sizeof long_str_ok, "\"%0*d\"", id_max, 7);
    snprintf(long_str_bad, sizeof long_str_bad, "\"%0*d\"", id_max + 1, 7);
    long_num_ok[0] = long_num_bad[0] = '9';
    memset(long_num_ok + 1, '0', (size_t)id_max - 1);
    memset(long_num_bad + 1, '0', (size_t)id_max);
    snprintf(long_sid_ok, sizeof long_sid_ok, "\"%0*d\"", sid_max, 5);
    snprintf(long_sid_bad, sizeof long_sid_bad, "\"%0*d\"", sid_max + 1, 5);
}

static size_t token_len(size_t raw_len, sb_json_type type) {
    return type == SB_JSON_STRING ? raw_len - 2 : raw_len;
}

/* ---- The input -------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t n, i;
} reader;

static unsigned rd(reader *r) {
    return r->i < r->n ? r->p[r->i++] : 0;
}

/* ---- Reference model: pending tables ---------------------------------- */

typedef struct {
    bool used;
    int receiver, sender;
    uint64_t seq;
    size_t id_len, session_len;
    char id[ID_RAW_MAX];
    char session[SID_RAW_MAX];
    int next;  /* bucket chain, or free list */
    int vnext; /* chain of entries whose ids hash to one value */
} m_req;

typedef struct {
    m_req e[CAP_PENDING];
    int bucket[M_BUCKETS];
    int vbucket[M_BUCKETS];
    int free_head, high, count;
    uint64_t next_seq;
} m_pending;

NO_COVERAGE static uint32_t fnv(uint32_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static uint32_t req_hash(int receiver, const char *id, size_t id_len) {
    return fnv(2166136261u + (uint32_t)receiver * 977u, id, id_len) & (M_BUCKETS - 1);
}

/* SB-I-45: the JSON value of an id token, as cJSON reads it (an oracle
 * independent of src/base/idkey.c): numbers as their double (-0 as 0), strings
 * decoded, tagged by type. Returns its length in out (128+ bytes). */
NO_COVERAGE static size_t id_value(const char *id, size_t id_len, char *out, size_t cap) {
    char tmp[ID_RAW_MAX + 1];
    size_t n = id_len < sizeof tmp - 1 ? id_len : sizeof tmp - 1;
    memcpy(tmp, id, n);
    tmp[n] = '\0';
    cJSON *v = cJSON_Parse(tmp);
    int len;
    if (v && cJSON_IsNumber(v))
        len = snprintf(out, cap, "n%.17g", v->valuedouble == 0 ? 0.0 : v->valuedouble);
    else if (v && cJSON_IsString(v))
        len = snprintf(out, cap, "s%s", v->valuestring);
    else
        len = snprintf(out, cap, "r%.*s", (int)n, tmp);
    cJSON_Delete(v);
    return len > 0 ? ((size_t)len < cap ? (size_t)len : cap - 1) : 0;
}

static uint32_t value_hash(int receiver, const char *id, size_t id_len) {
    char v[ID_RAW_MAX + 8];
    size_t n = id_value(id, id_len, v, sizeof v);
    return fnv(2166136261u + (uint32_t)receiver * 977u, v, n) & (M_BUCKETS - 1);
}

NO_COVERAGE static void mp_reset(m_pending *t) {
    for (int i = 0; i < M_BUCKETS; i++)
        t->bucket[i] = t->vbucket[i] = -1;
    t->free_head = -1;
    t->high = t->count = 0;
    t->next_seq = 0;
}

/* Entries of one sender (by_sender) or one receiver: the fair shares of
 * SB-I-51 and SB-I-52, counted by a scan as a model may. */
NO_COVERAGE static int mp_count(const m_pending *t, bool by_sender, int who) {
    int n = 0;
    for (int i = 0; i < t->high; i++)
        if (t->e[i].used && (by_sender ? t->e[i].sender : t->e[i].receiver) == who)
            n++;
    return n;
}

static bool mp_add(m_pending *t, int receiver, int sender, const char *id, size_t id_len,
                   const char *session, size_t session_len) {
    int i;
    if (t->free_head >= 0) {
        i = t->free_head;
        t->free_head = t->e[i].next;
    } else if (t->high < CAP_PENDING) {
        i = t->high++;
    } else {
        return false;
    }
    m_req *q = &t->e[i];
    q->used = true;
    q->receiver = receiver;
    q->sender = sender;
    q->seq = t->next_seq++;
    q->id_len = id_len;
    memcpy(q->id, id, id_len);
    q->session_len = session_len;
    if (session_len)
        memcpy(q->session, session, session_len);
    uint32_t h = req_hash(receiver, id, id_len);
    q->next = t->bucket[h];
    t->bucket[h] = i;
    uint32_t vh = value_hash(receiver, id, id_len);
    q->vnext = t->vbucket[vh];
    t->vbucket[vh] = i;
    t->count++;
    return true;
}

NO_COVERAGE static bool mp_match(const m_req *q, int receiver, const char *id, size_t id_len) {
    return q->receiver == receiver && q->id_len == id_len && memcmp(q->id, id, id_len) == 0;
}

/* SB-I-45: does `receiver` hold a request whose id has this id's value? */
static bool mp_holds(const m_pending *t, int receiver, const char *id, size_t id_len) {
    char want[ID_RAW_MAX + 8], have[ID_RAW_MAX + 8];
    size_t n = id_value(id, id_len, want, sizeof want);
    for (int i = t->vbucket[value_hash(receiver, id, id_len)]; i >= 0; i = t->e[i].vnext) {
        const m_req *q = &t->e[i];
        if (q->receiver == receiver && id_value(q->id, q->id_len, have, sizeof have) == n &&
            memcmp(have, want, n) == 0)
            return true;
    }
    return false;
}

static void mp_remove(m_pending *t, int index) {
    m_req *q = &t->e[index];
    int *link = &t->bucket[req_hash(q->receiver, q->id, q->id_len)];
    while (*link != index)
        link = &t->e[*link].next;
    *link = q->next;
    link = &t->vbucket[value_hash(q->receiver, q->id, q->id_len)];
    while (*link != index)
        link = &t->e[*link].vnext;
    *link = q->vnext;
    q->used = false;
    q->next = t->free_head;
    t->free_head = index;
    t->count--;
}

/* SB-I-3: which pending entry a response from `receiver` answers, removed;
 * returns its sender or -1. Among the entries with this id, the oldest of
 * the best kind: one recorded with the response's sessionId, else one
 * recorded without a sessionId, else (only for a response without a
 * sessionId) one recorded with some sessionId. An entry of another session
 * is never taken by a response that names its session: that request belongs
 * to another session and so to its owner (SB-I-4), and this response is for
 * a request no longer pending, e.g. one of a client that left (SB-I-23:
 * it reaches no one). Nor does a response without a sessionId take such an
 * entry while an entry without one is waiting (two clients using the same
 * id on one worker, one in a session).
 *
 * -DSB_FUZZ_ALLOW_CROSS_SESSION_MATCH models the router as it was when this
 * was found (the same sessionId first, else simply the oldest), for
 * campaigns run before the fix. */
static int mp_take(m_pending *t, int receiver, const char *id, size_t id_len, const char *session,
                   size_t session_len) {
    int best = -1, best_rank = 3;
    for (int i = t->bucket[req_hash(receiver, id, id_len)]; i >= 0; i = t->e[i].next) {
        const m_req *q = &t->e[i];
        if (!mp_match(q, receiver, id, id_len))
            continue;
        bool same = session_len && q->session_len == session_len &&
                    memcmp(q->session, session, session_len) == 0;
        int rank;
#ifndef SB_FUZZ_ALLOW_CROSS_SESSION_MATCH
        if (same)
            rank = 0;
        else if (q->session_len == 0)
            rank = 1;
        else
            rank = 2;
#else
        rank = same ? 0 : 1;
#endif
        if (rank < best_rank || (rank == best_rank && q->seq < t->e[best].seq)) {
            best = i;
            best_rank = rank;
        }
    }
    if (best < 0)
        return -1;
    int sender = t->e[best].sender;
    mp_remove(t, best);
    return sender;
}

NO_COVERAGE static int mp_drop(m_pending *t, int who, bool by_receiver) {
    int n = 0;
    for (int i = 0; i < t->high; i++)
        if (t->e[i].used && (by_receiver ? t->e[i].receiver : t->e[i].sender) == who) {
            mp_remove(t, i);
            n++;
        }
    return n;
}

/* The k-th entry received by `receiver` (k wraps), or NULL. */
NO_COVERAGE static const m_req *mp_nth(const m_pending *t, int receiver, unsigned k) {
    int n = 0;
    for (int i = 0; i < t->high; i++)
        if (t->e[i].used && t->e[i].receiver == receiver)
            n++;
    if (n == 0)
        return NULL;
    k %= (unsigned)n;
    for (int i = 0; i < t->high; i++)
        if (t->e[i].used && t->e[i].receiver == receiver && k-- == 0)
            return &t->e[i];
    return NULL;
}

/* ---- Reference model: sessions ---------------------------------------- */

typedef struct {
    bool used;
    int worker, client;
    size_t len;
    char key[SID_RAW_MAX];
    int next;
} m_sess;

typedef struct {
    m_sess e[CAP_SESSIONS];
    int bucket[M_BUCKETS];
    int free_head, high, count;
    int adds; /* this input's, for restoring the router afterwards */
} m_sessions;

static uint32_t sess_hash(const char *key, size_t len) {
    return fnv(2166136261u, key, len) & (M_BUCKETS - 1);
}

NO_COVERAGE static void ms_reset(m_sessions *t) {
    for (int i = 0; i < M_BUCKETS; i++)
        t->bucket[i] = -1;
    t->free_head = -1;
    t->high = t->count = t->adds = 0;
}

static m_sess *ms_find(m_sessions *t, const char *key, size_t len) {
    for (int i = t->bucket[sess_hash(key, len)]; i >= 0; i = t->e[i].next)
        if (t->e[i].len == len && memcmp(t->e[i].key, key, len) == 0)
            return &t->e[i];
    return NULL;
}

static void ms_add(m_sessions *t, const char *key, size_t len, int worker, int client) {
    int i;
    if (t->free_head >= 0) {
        i = t->free_head;
        t->free_head = t->e[i].next;
    } else {
        CHECK(t->high < CAP_SESSIONS); /* the caller checked the count */
        i = t->high++;
    }
    t->adds++;
    m_sess *s = &t->e[i];
    s->used = true;
    s->worker = worker;
    s->client = client;
    s->len = len;
    memcpy(s->key, key, len);
    uint32_t h = sess_hash(key, len);
    s->next = t->bucket[h];
    t->bucket[h] = i;
    t->count++;
}

NO_COVERAGE static int ms_drop(m_sessions *t, int who, bool by_worker) {
    int n = 0;
    for (int i = 0; i < t->high; i++) {
        m_sess *s = &t->e[i];
        if (!s->used || (by_worker ? s->worker : s->client) != who)
            continue;
        int *link = &t->bucket[sess_hash(s->key, s->len)];
        while (*link != i)
            link = &t->e[*link].next;
        *link = s->next;
        s->used = false;
        s->next = t->free_head;
        t->free_head = i;
        t->count--;
        n++;
    }
    return n;
}

NO_COVERAGE static const m_sess *ms_nth(const m_sessions *t, unsigned k) {
    if (t->count == 0)
        return NULL;
    k %= (unsigned)t->count;
    for (int i = 0; i < t->high; i++)
        if (t->e[i].used && k-- == 0)
            return &t->e[i];
    return NULL;
}

/* ---- The world: router under test plus model --------------------------- */

typedef enum {
    W_STOPPED = 0, /* never started, or exited: owns nothing */
    W_RUNNING,
    W_FAILED /* malformed output: not running, sessions gone, pending kept until exit */
} w_state;

typedef struct {
    sb_router router;
    int workers, clients;
    w_state state[MAX_WORKERS];
    bool connected[MAX_CLIENTS];
    int rr;
    m_sessions sessions;
    m_pending requests; /* receiver = worker, sender = client */
    m_pending upstream; /* receiver = client, sender = worker */
    long messages;
    unsigned unique; /* for bulk ids and sessionIds */
    const char *op;  /* what is being done, for the report */
} world;

static world W; /* large: static, reset for every input */

/* ROUTER_FUZZER_TRACE=1 prints every event and decision, to read what a
 * reproducer does. */
static bool tracing;

static void trace_line(const char *who, int index, const char *line, size_t len,
                       const sb_route *d) {
    if (!tracing)
        return;
    int shown = (int)(len > 200 ? 200 : len);
    while (shown > 0 && (line[shown - 1] == '\n' || line[shown - 1] == '\r'))
        shown--;
    fprintf(stderr, "%s %d: %.*s%s\n    -> action %d target %d why \"%s\"%s%s\n", who, index, shown,
            line, len > 200 ? "..." : "", d->action, d->target, sb_router_why(d->why),
            d->is_request ? " request" : "", d->new_session ? " new-session" : "");
}

static void trace_event(const char *what, int index) {
    if (tracing)
        fprintf(stderr, "%s %d\n", what, index);
}

static void fail_check(int line, const char *what) {
    fprintf(stderr, "router_fuzzer: line %d: check failed: %s (during %s, message %ld)\n", line,
            what, W.op ? W.op : "?", W.messages);
    abort();
}

/* ---- Walking the router's tables -------------------------------------- */

/* Walks one list of the router's session table; returns its length. */
NO_COVERAGE static int walk_sessions(const sb_sessions *t, bool by_worker, int who) {
    int n = 0;
    int side = by_worker ? SB_SESSION_BY_WORKER : SB_SESSION_BY_CLIENT;
    for (int32_t i = sb_slots_first(&t->slots, side, who); i != -1;
         i = sb_slots_link(&t->slots, i)->next[side]) {
        CHECK(i >= 0 && i < t->slots.capacity &&
              n <= t->slots.capacity); /* no cycle, no wild index */
        const sb_session *s = &((const sb_session *)t->slots.entries)[i];
        CHECK(s->key_len > 0);
        CHECK((by_worker ? s->worker : s->client) == who);
        CHECK(s->worker >= 0 && s->worker < W.workers && s->client >= 0 && s->client < W.clients);
        /* Never on an exited or failed worker, never of a gone client. */
        CHECK(W.state[s->worker] == W_RUNNING);
        CHECK(W.connected[s->client]);
        /* Same worker and owner as when it was made (SB-6.1.2-2, SB-6.1.1-3). */
        const m_sess *m = ms_find(&W.sessions, s->key, s->key_len);
        CHECK(m != NULL);
        CHECK(m->worker == s->worker);
        CHECK(m->client == s->client);
        n++;
    }
    return n;
}

NO_COVERAGE static int walk_pending(const sb_pending *t, const m_pending *model, bool by_receiver,
                                    int who, bool upstream) {
    int n = 0;
    int side = by_receiver ? SB_PENDING_BY_RECEIVER : SB_PENDING_BY_SENDER;
    for (int32_t i = sb_slots_first(&t->slots, side, who); i != -1;
         i = sb_slots_link(&t->slots, i)->next[side]) {
        CHECK(i >= 0 && i < t->slots.capacity && n <= t->slots.capacity);
        const sb_request *q = &((const sb_request *)t->slots.entries)[i];
        CHECK(q->id_len > 0);
        CHECK((by_receiver ? q->receiver : q->sender) == who);
        int worker = upstream ? q->sender : q->receiver;
        int client = upstream ? q->receiver : q->sender;
        CHECK(worker >= 0 && worker < W.workers && client >= 0 && client < W.clients);
        CHECK(W.state[worker] != W_STOPPED); /* SB-7.1.2-4 */
        CHECK(W.connected[client]);          /* SB-7.2-2 */
        const m_req *m = NULL;
        for (int k = model->bucket[req_hash(q->receiver, q->id, q->id_len)]; k >= 0;
             k = model->e[k].next)
            if (mp_match(&model->e[k], q->receiver, q->id, q->id_len) && model->e[k].seq == q->seq)
                m = &model->e[k];
        CHECK(m != NULL);
        CHECK(m->sender == q->sender);
        CHECK(m->session_len == q->session_len &&
              memcmp(m->session, q->session, q->session_len) == 0);
        n++;
    }
    return n;
}

NO_COVERAGE static void check_pending(const sb_pending *t, const m_pending *model, bool upstream) {
    CHECK(t->slots.count == model->count);
    int receivers = upstream ? W.clients : W.workers, senders = upstream ? W.workers : W.clients;
    int by_recv = 0, by_send = 0;
    for (int r = 0; r < receivers; r++)
        by_recv += walk_pending(t, model, true, r, upstream);
    for (int s = 0; s < senders; s++)
        by_send += walk_pending(t, model, false, s, upstream);
    CHECK(by_recv == t->slots.count && by_send == t->slots.count);
}

/* Compares every table of the router with the model. */
NO_COVERAGE static void check_tables(void) {
    const sb_sessions *st = &W.router.sessions;
    CHECK(st->slots.count == W.sessions.count);
    int by_worker = 0, by_client = 0;
    for (int w = 0; w < W.workers; w++)
        by_worker += walk_sessions(st, true, w);
    for (int c = 0; c < W.clients; c++)
        by_client += walk_sessions(st, false, c);
    CHECK(by_worker == st->slots.count && by_client == st->slots.count);
    /* Every model session is found through the hash (SB-6.1.2-1). */
    for (int i = 0; i < W.sessions.high; i++) {
        const m_sess *m = &W.sessions.e[i];
        if (!m->used)
            continue;
        sb_session *s = sb_sessions_find(&W.router.sessions, m->key, m->len);
        CHECK(s != NULL && s->worker == m->worker && s->client == m->client);
    }
    check_pending(&W.router.requests, &W.requests, false);
    check_pending(&W.router.upstream, &W.upstream, true);
}

static void check_counts(void) {
    CHECK(W.router.sessions.slots.count == W.sessions.count);
    CHECK(W.router.requests.slots.count == W.requests.count);
    CHECK(W.router.upstream.slots.count == W.upstream.count);
}

/* ---- Lifecycle events, applied to router and model alike ----------------- */

/* The drop functions show each entry to a visitor before removing it (the
 * daemon logs from there and sends orphan errors): each must be one of the
 * entries being dropped, still intact. */
typedef struct {
    int who;
    bool by_first; /* by worker / by receiver, else by client / by sender */
    int visits;
} visit_ctx;

static void visit_session(void *ctx, const sb_session *s) {
    visit_ctx *v = ctx;
    CHECK(s->key_len > 0 && (v->by_first ? s->worker : s->client) == v->who);
    CHECK(ms_find(&W.sessions, s->key, s->key_len) != NULL);
    v->visits++;
}

static void visit_request(void *ctx, const sb_request *q) {
    visit_ctx *v = ctx;
    CHECK(q->id_len > 0 && (v->by_first ? q->receiver : q->sender) == v->who);
    v->visits++;
}

static int drop_sessions(int who, bool by_worker) {
    visit_ctx v = {who, by_worker, 0};
    int n = by_worker ? sb_sessions_drop_worker(&W.router.sessions, who, visit_session, &v)
                      : sb_sessions_drop_client(&W.router.sessions, who, visit_session, &v);
    CHECK(n == v.visits);
    CHECK(n == ms_drop(&W.sessions, who, by_worker));
    return n;
}

static int drop_pending(sb_pending *t, m_pending *model, int who, bool by_receiver) {
    visit_ctx v = {who, by_receiver, 0};
    int n = by_receiver ? sb_pending_drop_receiver(t, who, visit_request, &v)
                        : sb_pending_drop_sender(t, who, visit_request, &v);
    CHECK(n == v.visits);
    CHECK(n == mp_drop(model, who, by_receiver));
    return n;
}

static void worker_start(int w) {
    if (W.state[w] != W_STOPPED)
        return;
    trace_event("worker start", w);
    W.state[w] = W_RUNNING;
    sb_router_set_running(&W.router, w, true);
}

/* What the daemon does on malformed output (SB-5.3, SB-I-29): the worker
 * gets nothing more and its sessions go; its pending requests wait for its
 * exit. */
static void worker_fail(int w) {
    if (W.state[w] != W_RUNNING)
        return;
    trace_event("worker fail", w);
    W.state[w] = W_FAILED;
    sb_router_set_running(&W.router, w, false);
    drop_sessions(w, true);
}

/* SB-7.1.2: STOPPED, sessions invalidated, requests pending on it discarded,
 * and its own requests to clients forgotten. */
static void worker_exit(int w) {
    if (W.state[w] == W_STOPPED)
        return;
    trace_event("worker exit", w);
    sb_router_set_running(&W.router, w, false);
    W.state[w] = W_STOPPED;
    drop_sessions(w, true);
    drop_pending(&W.router.requests, &W.requests, w, true);
    drop_pending(&W.router.upstream, &W.upstream, w, false);
}

/* SB-7.2: sessions invalidated, pending requests discarded. */
static void client_disconnect(int c) {
    if (!W.connected[c])
        return;
    trace_event("client disconnect", c);
    W.connected[c] = false;
    drop_sessions(c, false);
    drop_pending(&W.router.requests, &W.requests, c, false);
    drop_pending(&W.router.upstream, &W.upstream, c, true);
}

/* ---- Building lines --------------------------------------------------- */

typedef struct {
    const tok *id, *sid, *method; /* first occurrences; NULL = absent */
    bool result, error;
} msg;

typedef enum { LINE_OBJECT, LINE_BLANK, LINE_GARBAGE, LINE_NOT_OBJECT, LINE_TRUNCATED } line_kind;

typedef struct {
    char buf[LINE_CAP];
    size_t len;
} line_buf;

static void put(line_buf *l, const char *s) {
    size_t n = strlen(s);
    if (n > LINE_CAP - 2 - l->len)
        n = LINE_CAP - 2 - l->len; /* room for "\r\n"; never reached by our lines */
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void put_member(line_buf *l, bool *first, const char *key, const char *value) {
    if (!*first)
        put(l, ",");
    *first = false;
    put(l, key);
    put(l, ":");
    put(l, value);
}

/* Writes the object for m, with decoys decided by r, then the newline. */
static void build_object(line_buf *l, const msg *m, reader *r) {
    unsigned style = rd(r);
    /* Members in one of several orders; routing-looking members nested in
     * params never count (SB-I-28); duplicates after the first occurrence
     * never count (SB-I-19); escaped member names do (SB-I-28). */
    const char *keys[8], *values[8];
    int n = 0;
    if (style & 1) {
        keys[n] = "\"jsonrpc\"";
        values[n++] = "\"2.0\"";
    }
    if (m->id) {
        keys[n] = (style & 2) ? "\"\\u0069d\"" : "\"id\"";
        values[n++] = m->id->raw;
    }
    if (m->sid) {
        keys[n] = (style & 4) ? "\"sessi\\u006fnId\"" : "\"sessionId\"";
        values[n++] = m->sid->raw;
    }
    if (m->method) {
        keys[n] = (style & 8) ? "\"m\\u0065thod\"" : "\"method\"";
        values[n++] = m->method->raw;
    }
    if (m->result) {
        keys[n] = "\"result\"";
        values[n++] = (style & 16) ? "null" : "{\"sessionId\":\"s1\",\"id\":1}";
    }
    if (m->error) {
        keys[n] = (style & 16) ? "\"\\u0065rror\"" : "\"error\"";
        values[n++] = "{\"code\":-32601,\"message\":\"x\"}";
    }
    if (style & 32) {
        keys[n] = "\"params\"";
        values[n++] = "{\"sessionId\":\"s2\",\"id\":2,\"method\":1,\"result\":{},\"x\":[\"id\"]}";
    }
    /* Order: a rotation of the members, the routing ones keep their
     * relative order only when no duplicate follows. */
    unsigned rot = n ? rd(r) % (unsigned)n : 0;
    bool first = true;
    put(l, (style & 64) ? " {" : "{");
    for (int i = 0; i < n; i++) {
        int k = (int)((unsigned)i + rot) % n;
        put_member(l, &first, keys[k], values[k]);
    }
    unsigned dup = rd(r);
    if (m->id && (dup & 1))
        put_member(l, &first, (dup & 2) ? "\"\\u0069d\"" : "\"id\"",
                   id_set[(dup >> 2) % ALL_IDS].raw);
    if (m->sid && (dup & 64))
        put_member(l, &first, "\"sessionId\"", sid_set[(dup >> 2) % ALL_SIDS].raw);
    if (m->method && (dup & 128))
        put_member(l, &first, "\"method\"", "[]");
    put(l, "}");
    put(l, (style & 128) ? "\r\n" : "\n"); /* SB-I-6: CRLF is fine */
}

/* Builds a line of the given kind into l; for LINE_OBJECT from m. */
static void build_line(line_buf *l, line_kind kind, const msg *m, reader *r) {
    static const char *const not_objects[] = {
        "[{\"id\":1,\"sessionId\":\"s1\"}]", "42", "\"s1\"", "null", "true", "[]",
    };
    static const char *const blanks[] = {"", " ", "\t", "\r", " \t \r"};
    l->len = 0;
    switch (kind) {
    case LINE_OBJECT:
        build_object(l, m, r);
        return;
    case LINE_BLANK:
        put(l, blanks[rd(r) % 5]);
        put(l, "\n");
        return;
    case LINE_GARBAGE: {
        /* 'x' cannot start a JSON text, whatever follows. */
        put(l, "x");
        unsigned n = rd(r) % 24;
        for (unsigned i = 0; i < n; i++) {
            char c = (char)rd(r);
            l->buf[l->len++] = c == '\n' ? ' ' : c;
        }
        put(l, "\n");
        return;
    }
    case LINE_NOT_OBJECT:
        put(l, not_objects[rd(r) % 6]);
        put(l, "\n");
        return;
    case LINE_TRUNCATED: {
        /* A proper prefix of an object ends before its closing brace, so it
         * is never JSON. */
        build_object(l, m, r);
        size_t body = l->len - 1;
        while (body > 0 && (l->buf[body - 1] == '\r' || l->buf[body - 1] == '}'))
            body--; /* up to and without the final '}' */
        /* At least "{" (or " {": a lone " " would be a blank line). */
        size_t min = l->buf[0] == ' ' ? 2 : 1;
        l->len = min + rd(r) % (body - min + 1);
        l->buf[l->len++] = '\n';
        return;
    }
    }
}

static const tok *pick_id(unsigned b) {
    switch (b % 4) {
    case 0:
        return NULL;
    case 3:
        return &id_set[(b / 4) % ALL_IDS];
    default:
        return &id_set[(b / 4) % GOOD_IDS];
    }
}

static const tok *pick_sid(unsigned b) {
    switch (b % 4) {
    case 0:
        return NULL;
    case 3:
        return &sid_set[(b / 4) % ALL_SIDS];
    default:
        return &sid_set[(b / 4) % GOOD_SIDS];
    }
}

static const tok *pick_method(unsigned b) {
    switch (b % 4) {
    case 0:
        return NULL;
    case 3:
        return &method_set[(b / 4) % ALL_METHODS];
    default:
        return &method_set[(b / 4) % GOOD_METHODS];
    }
}

static line_kind pick_kind(unsigned b) {
    switch (b % 16) {
    case 0:
        return LINE_BLANK;
    case 1:
        return LINE_GARBAGE;
    case 2:
        return LINE_NOT_OBJECT;
    case 3:
        return LINE_TRUNCATED;
    default:
        return LINE_OBJECT;
    }
}

/* ---- Expected decisions ------------------------------------------------ */

typedef struct {
    sb_route_action action;
    sb_route_why why; /* for DROP; REJECT is checked against rejects_for() */
    int target, other;
    bool is_request, new_session;
} expect;

static size_t raw_len(const tok *t) {
    return strlen(t->raw);
}

/* Why a line of this kind with these first occurrences cannot be routed
 * (SB-4.3, SB-I-1, SB-I-2, SB-I-18, SB-I-27), as a bit set of reasons; 0
 * when it can. */
static unsigned rejects_for(line_kind kind, const msg *m) {
    if (kind == LINE_GARBAGE || kind == LINE_TRUNCATED)
        return 1u << SB_WHY_NOT_JSON;
    if (kind == LINE_NOT_OBJECT)
        return 1u << SB_WHY_NOT_OBJECT;
    unsigned why = 0;
    if (m->id) {
        sb_json_type t = m->id->type;
        if (t != SB_JSON_STRING && t != SB_JSON_NUMBER && t != SB_JSON_NULL)
            why |= 1u << SB_WHY_BAD_ID_TYPE;
        else if (token_len(raw_len(m->id), t) > STDIO_BUS_MAX_REQUEST_ID_LEN)
            why |= 1u << SB_WHY_ID_TOO_LONG;
    }
    if (m->sid) {
        if (m->sid->type != SB_JSON_STRING)
            why |= 1u << SB_WHY_BAD_SESSION_TYPE;
        else if (raw_len(m->sid) - 2 > STDIO_BUS_MAX_SESSION_ID_LEN)
            why |= 1u << SB_WHY_SESSION_TOO_LONG;
    }
    if (m->method && m->method->type != SB_JSON_STRING)
        why |= 1u << SB_WHY_BAD_METHOD_TYPE;
    return why;
}

#define PICK_BUSY (-2)

/* SB-I-30 with SB-I-45: the next running worker after the cursor that holds
 * no id of this value; PICK_BUSY (cursor unmoved) when every running worker
 * holds one, -1 when none runs. */
static int model_pick(const tok *id) {
    int result = -1;
    for (int n = 0; n < W.workers; n++) {
        int w = (W.rr + n) % W.workers;
        if (W.state[w] != W_RUNNING)
            continue;
        if (id && mp_holds(&W.requests, w, id->raw, raw_len(id))) {
            result = PICK_BUSY;
            continue;
        }
        W.rr = (w + 1) % W.workers;
        return w;
    }
    return result;
}

/* What the router must do with a routable client message, applied to the
 * model (spec 6.1, 6.2, SB-I-4, SB-I-12, SB-I-14, SB-I-18, SB-I-24). */
static expect model_from_client(int c, const msg *m) {
    expect e = {SB_ROUTE_DROP, SB_WHY_NONE, -1, -1, false, false};
    const char *sid = m->sid ? m->sid->raw : NULL;
    size_t sid_len = m->sid ? raw_len(m->sid) : 0;

    if ((m->result || m->error) && !m->method) { /* SB-I-14: a client response */
        if (m->id) {
            int w = mp_take(&W.upstream, c, m->id->raw, raw_len(m->id), sid, sid_len);
            if (w >= 0 && W.state[w] == W_RUNNING) {
                e.action = SB_ROUTE_TO_WORKER;
                e.target = w;
                return e;
            }
        }
        if (m->sid) {
            const m_sess *s = ms_find(&W.sessions, sid, sid_len);
            if (s && s->client == c && W.state[s->worker] == W_RUNNING) {
                e.action = SB_ROUTE_TO_WORKER;
                e.target = s->worker;
                return e;
            }
        }
        e.why = SB_WHY_NO_REQUEST;
        return e;
    }

    e.is_request = m->id != NULL; /* SB-I-24 */
    if (m->id) {                  /* SB-I-18, SB-I-54: a full table holds the request */
        int held = mp_count(&W.requests, true, c);
        int free = CAP_PENDING - W.requests.count;
        if (free <= 0) {
            e.action = SB_ROUTE_HOLD;
            e.why = SB_WHY_PENDING_FULL;
            return e;
        }
        /* SB-I-51 (issue 32): beyond its floor a client takes only what leaves the connected
         * clients' floors free. The harness drives the tables without connecting clients
         * (sb_router_add_client), so the floors still free are the router's own count. */
        if (held >= SB_ROUTER_FLOOR && free <= W.router.floor_free) {
            e.action = SB_ROUTE_HOLD; /* SB-I-54: held, never dropped */
            e.why = SB_WHY_CLIENT_SHARE;
            return e;
        }
    }
    int target;
    if (m->sid) {
        const m_sess *s = ms_find(&W.sessions, sid, sid_len);
        if (s) {
            if (s->client != c) { /* SB-I-4 */
                e.why = SB_WHY_FOREIGN_SESSION;
                e.other = s->client;
                return e;
            }
            CHECK(W.state[s->worker] == W_RUNNING); /* model: sessions live on running workers */
            target = s->worker;
            if (m->id && mp_holds(&W.requests, target, m->id->raw, raw_len(m->id))) {
                e.action = SB_ROUTE_HOLD; /* SB-I-45 */
                e.why = SB_WHY_ID_IN_USE;
                return e;
            }
        } else {
            if (W.sessions.count >= CAP_SESSIONS) {
                e.why = SB_WHY_SESSIONS_FULL;
                return e;
            }
            target = model_pick(m->id);
            if (target == PICK_BUSY) {
                e.action = SB_ROUTE_HOLD;
                e.why = SB_WHY_ID_IN_USE;
                return e;
            }
            if (target < 0) {
                e.why = SB_WHY_NO_WORKER;
                return e;
            }
            ms_add(&W.sessions, sid, sid_len, target, c);
            e.new_session = true;
        }
    } else {
        target = model_pick(m->id);
        if (target == PICK_BUSY) {
            e.action = SB_ROUTE_HOLD;
            e.why = SB_WHY_ID_IN_USE;
            return e;
        }
        if (target < 0) {
            e.why = SB_WHY_NO_WORKER;
            return e;
        }
    }
    if (m->id)
        CHECK(mp_add(&W.requests, target, c, m->id->raw, raw_len(m->id), sid, sid_len));
    e.action = SB_ROUTE_TO_WORKER;
    e.target = target;
    return e;
}

/* SB-6.3, SB-I-15, SB-I-31, SB-I-32. */
static expect model_from_worker(int w, const msg *m) {
    expect e = {SB_ROUTE_DROP, SB_WHY_NONE, -1, -1, false, false};
    const char *sid = m->sid ? m->sid->raw : NULL;
    size_t sid_len = m->sid ? raw_len(m->sid) : 0;
    if (m->result || m->error) {
        int c = m->id ? mp_take(&W.requests, w, m->id->raw, raw_len(m->id), sid, sid_len) : -1;
        if (c < 0) {
            e.why = SB_WHY_UNKNOWN_ID;
            return e;
        }
        e.action = SB_ROUTE_TO_CLIENT;
        e.target = c;
        return e;
    }
    if (m->sid) {
        const m_sess *s = ms_find(&W.sessions, sid, sid_len);
        if (!s) {
            e.why = SB_WHY_UNKNOWN_SESSION;
            return e;
        }
        if (m->id && m->method) { /* SB-I-15, within the client's share (SB-I-52) */
            int owed = mp_count(&W.upstream, false, s->client);
            int free = W.router.upstream.slots.capacity - W.upstream.count;
            if (owed >= SB_ROUTER_UPSTREAM_SHARE ||
                (owed >= SB_ROUTER_FLOOR && free > 0 && free <= W.router.upstream_floor_free)) {
                e.why = SB_WHY_UPSTREAM_SHARE;
                return e;
            }
            if (!mp_add(&W.upstream, s->client, w, m->id->raw, raw_len(m->id), sid, sid_len)) {
                e.why = SB_WHY_UPSTREAM_FULL;
                return e;
            }
        }
        e.action = SB_ROUTE_TO_CLIENT;
        e.target = s->client;
        return e;
    }
    e.why = SB_WHY_UNROUTABLE;
    return e;
}

/* ---- Sending a line through router and model ----------------------------- */

static void check_tokens(const sb_route *d, const char *line, size_t len) {
    const sb_token *t[] = {&d->fields.id, &d->fields.session_id, &d->fields.method,
                           &d->fields.result, &d->fields.error};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (t[i]->type != SB_JSON_ABSENT)
            CHECK(t[i]->raw >= line && t[i]->raw + t[i]->raw_len <= line + len);
}

static void compare(const sb_route *d, const expect *e, unsigned rejects) {
    CHECK(strcmp(sb_router_why(d->why), "?") != 0); /* every reason has a text for the log */
    if (d->action != e->action) {
        fprintf(stderr, "router_fuzzer: action %d (%s), expected %d (why %d)\n", d->action,
                sb_router_why(d->why), e->action, e->why);
        fail_check(__LINE__, "action as the model predicts");
    }
    switch (d->action) {
    case SB_ROUTE_REJECT:
        CHECK(rejects & (1u << d->why));
        break;
    case SB_ROUTE_DROP:
        CHECK(d->why == e->why);
        if (e->why == SB_WHY_FOREIGN_SESSION)
            CHECK(d->other == e->other);
        break;
    case SB_ROUTE_TO_WORKER:
        CHECK(d->target == e->target);
        CHECK(d->target >= 0 && d->target < W.workers);
        CHECK(W.state[d->target] == W_RUNNING); /* SB-7.1.2-1 */
        break;
    case SB_ROUTE_TO_CLIENT:
        CHECK(d->target == e->target);
        CHECK(d->target >= 0 && d->target < W.clients && W.connected[d->target]);
        break;
    case SB_ROUTE_HOLD:
        CHECK(d->why == e->why);
        break;
    case SB_ROUTE_IGNORE:
        break;
    }
    CHECK(d->is_request == e->is_request);
    CHECK(d->new_session == e->new_session);
}

/* Router and model both see the line; their decisions must agree. */
static void send_from_client(int c, line_kind kind, const msg *m, reader *r) {
    static line_buf l;
    build_line(&l, kind, m, r);
    /* A buffer of exactly the line, so ASan sees any read past it. */
    char *line = malloc(l.len);
    CHECK(line != NULL);
    memcpy(line, l.buf, l.len);
    W.connected[c] = true; /* a message on a free slot is a new connection */
    W.messages++;

    sb_route d = sb_router_from_client(&W.router, c, line, l.len);
    check_tokens(&d, line, l.len);
    trace_line("client", c, line, l.len, &d);
    unsigned rejects = kind == LINE_BLANK ? 0 : rejects_for(kind, m);
    expect e = {SB_ROUTE_REJECT, SB_WHY_NONE, -1, -1, false, false};
    if (kind == LINE_BLANK)
        e.action = SB_ROUTE_IGNORE;
    else if (rejects == 0)
        e = model_from_client(c, m);
    compare(&d, &e, rejects);
    free(line);
    if (d.action == SB_ROUTE_REJECT)
        client_disconnect(c); /* SB-4.3: the daemon closes the client */
}

static void send_from_worker(int w, line_kind kind, const msg *m, reader *r) {
    if (W.state[w] != W_RUNNING)
        return; /* a failed worker's output is not routed; an exited one has none */
    static line_buf l;
    build_line(&l, kind, m, r);
    char *line = malloc(l.len);
    CHECK(line != NULL);
    memcpy(line, l.buf, l.len);
    W.messages++;

    sb_route d = sb_router_from_worker(&W.router, w, line, l.len);
    check_tokens(&d, line, l.len);
    trace_line("worker", w, line, l.len, &d);
    unsigned rejects = kind == LINE_BLANK ? 0 : rejects_for(kind, m);
    expect e = {SB_ROUTE_REJECT, SB_WHY_NONE, -1, -1, false, false};
    if (kind == LINE_BLANK)
        e.action = SB_ROUTE_IGNORE;
    else if (rejects == 0)
        e = model_from_worker(w, m);
    compare(&d, &e, rejects);
    free(line);
    if (d.action == SB_ROUTE_REJECT)
        worker_fail(w); /* SB-5.3 */
}

/* Bulk traffic with ids and sessionIds never used elsewhere; fills the
 * tables to their hard limits (SB-8.2-2, SB-8.2-3, SB-I-18). */
static char bulk_id[64], bulk_sid[64];
static tok bulk_id_tok = {bulk_id, SB_JSON_STRING}, bulk_sid_tok = {bulk_sid, SB_JSON_STRING};

static void bulk_tokens(void) {
    W.unique++;
    snprintf(bulk_id, sizeof bulk_id, "\"b%u\"", W.unique);
    snprintf(bulk_sid, sizeof bulk_sid, "\"B%u\"", W.unique);
}

/* ---- The operations --------------------------------------------------- */

static void op_client_message(reader *r) {
    int c = (int)(rd(r) % (unsigned)W.clients);
    line_kind kind = pick_kind(rd(r));
    msg m = {pick_id(rd(r)), pick_sid(rd(r)), pick_method(rd(r)), false, false};
    unsigned b = rd(r);
    m.result = (b & 3) == 1 || (b & 3) == 3;
    m.error = (b & 3) == 2 || (b & 3) == 3;
    if ((b & 12) == 4 && m.result) {
        /* Answer a request this client received from a worker (SB-I-14). */
        const m_req *q = mp_nth(&W.upstream, c, b >> 4);
        static tok id, sid;
        static char id_raw[ID_RAW_MAX + 1], sid_raw[SID_RAW_MAX + 1];
        if (q) {
            memcpy(id_raw, q->id, q->id_len);
            id_raw[q->id_len] = '\0';
            id = (tok){id_raw, q->id[0] == '"' ? SB_JSON_STRING : SB_JSON_NUMBER};
            if (q->id_len == 4 && memcmp(q->id, "null", 4) == 0)
                id.type = SB_JSON_NULL;
            m.id = &id;
            m.method = NULL;
            if (q->session_len && (b & 16)) {
                memcpy(sid_raw, q->session, q->session_len);
                sid_raw[q->session_len] = '\0';
                sid = (tok){sid_raw, SB_JSON_STRING};
                m.sid = &sid;
            }
        }
    }
    send_from_client(c, kind, &m, r);
}

static void op_worker_message(reader *r) {
    int w = (int)(rd(r) % (unsigned)W.workers);
    line_kind kind = pick_kind(rd(r));
    unsigned shape = rd(r);
    msg m = {pick_id(rd(r)), pick_sid(rd(r)), pick_method(rd(r)), false, false};
    static tok id, sid;
    static char id_raw[ID_RAW_MAX + 1], sid_raw[SID_RAW_MAX + 1];
    switch (shape % 6) {
    case 0: { /* a response to one of its pending requests (SB-6.3.1) */
        const m_req *q = mp_nth(&W.requests, w, shape >> 3);
        if (q) {
            memcpy(id_raw, q->id, q->id_len);
            id_raw[q->id_len] = '\0';
            id = (tok){id_raw, q->id[0] == '"' ? SB_JSON_STRING : SB_JSON_NUMBER};
            if (q->id_len == 4 && memcmp(q->id, "null", 4) == 0)
                id.type = SB_JSON_NULL;
            m.id = &id;
            if (q->session_len && (shape & 64)) {
                memcpy(sid_raw, q->session, q->session_len);
                sid_raw[q->session_len] = '\0';
                sid = (tok){sid_raw, SB_JSON_STRING};
                m.sid = &sid;
            }
        }
        m.method = NULL;
        m.result = !(shape & 128);
        m.error = !m.result || (shape & 32);
        break;
    }
    case 1: /* a response with an id of the set */
        m.result = !(shape & 8);
        m.error = !m.result;
        break;
    case 2: /* a notification or a request for a live session (SB-6.3.2, SB-I-15) */
    case 3: {
        const m_sess *s = ms_nth(&W.sessions, shape >> 3);
        if (s) {
            memcpy(sid_raw, s->key, s->len);
            sid_raw[s->len] = '\0';
            sid = (tok){sid_raw, SB_JSON_STRING};
            m.sid = &sid;
        }
        if (shape % 6 == 3 && m.method == NULL)
            m.method = &method_set[0];
        break;
    }
    default: /* whatever the set gives, result and error included */
        m.result = (shape & 8) != 0;
        m.error = (shape & 16) != 0;
        break;
    }
    send_from_worker(w, kind, &m, r);
}

/* A client sends n requests with fresh ids, with or without fresh
 * sessions, checking only the counts on the way. */
static void op_client_bulk(reader *r) {
    /* Mostly small: filling a table is slow, and one input that does is
     * enough for libFuzzer to keep. */
    static const int sizes[] = {8, 40, 8, 300, 40, 8, CAP_SESSIONS + 8, CAP_PENDING + 8};
    int c = (int)(rd(r) % (unsigned)W.clients);
    unsigned b = rd(r);
    int n = sizes[(b >> 4) % 8];
    for (int i = 0; i < n && W.messages < MAX_MESSAGES; i++) {
        bulk_tokens();
        msg m = {(b & 4) ? NULL : &bulk_id_tok, (b & 8) ? &bulk_sid_tok : NULL, &method_set[0],
                 false, false};
        send_from_client(c, LINE_OBJECT, &m, r);
        check_counts();
    }
}

/* A worker answers all (or every other) of its pending requests, or sends
 * many requests to the owner of one session (filling the upstream table). */
static void op_worker_bulk(reader *r) {
    int w = (int)(rd(r) % (unsigned)W.workers);
    unsigned b = rd(r);
    if (W.state[w] != W_RUNNING)
        return;
    if (b & 1) {
        const m_sess *s = ms_nth(&W.sessions, b >> 2);
        if (!s)
            return;
        static char sid_raw[SID_RAW_MAX + 1];
        memcpy(sid_raw, s->key, s->len);
        sid_raw[s->len] = '\0';
        tok sid = {sid_raw, SB_JSON_STRING};
        int n = (b & 0x30) == 0x30 ? CAP_PENDING + 8 : 40;
        for (int i = 0; i < n && W.messages < MAX_MESSAGES; i++) {
            bulk_tokens();
            msg m = {&bulk_id_tok, &sid, &method_set[1], false, false};
            send_from_worker(w, LINE_OBJECT, &m, r);
            check_counts();
        }
        return;
    }
    /* One pass over the model: an answer may take an older entry with the
     * same id (SB-I-3), which only leaves this one for later. */
    bool every_other = (b & 2) != 0;
    for (int i = 0; i < W.requests.high && W.messages < MAX_MESSAGES && W.state[w] == W_RUNNING;
         i++) {
        const m_req *q = &W.requests.e[i];
        if (!q->used || q->receiver != w || (every_other && (i & 1)))
            continue;
        static char id_raw[ID_RAW_MAX + 1];
        memcpy(id_raw, q->id, q->id_len);
        id_raw[q->id_len] = '\0';
        tok id = {id_raw, q->id[0] == '"' ? SB_JSON_STRING : SB_JSON_NUMBER};
        if (q->id_len == 4 && memcmp(q->id, "null", 4) == 0)
            id.type = SB_JSON_NULL;
        msg m = {&id, NULL, NULL, true, false};
        send_from_worker(w, LINE_OBJECT, &m, r);
        check_counts();
    }
}

static void run(reader *r) {
    for (int op = 0; op < MAX_OPS && r->i < r->n && W.messages < MAX_MESSAGES; op++) {
        unsigned code = rd(r) % 16;
        switch (code) {
        case 0:
        case 1:
            W.op = "worker start";
            worker_start((int)(rd(r) % (unsigned)W.workers));
            break;
        case 2:
            W.op = "worker fail";
            worker_fail((int)(rd(r) % (unsigned)W.workers));
            break;
        case 3:
            W.op = "worker exit";
            worker_exit((int)(rd(r) % (unsigned)W.workers));
            break;
        case 4:
            W.op = "client disconnect";
            client_disconnect((int)(rd(r) % (unsigned)W.clients));
            break;
        case 5:
            W.op = "client bulk";
            op_client_bulk(r);
            break;
        case 6:
            W.op = "worker bulk";
            op_worker_bulk(r);
            break;
        case 7:
        case 8:
        case 9:
        case 10:
            W.op = "worker message";
            op_worker_message(r);
            break;
        default:
            W.op = "client message";
            op_client_message(r);
            break;
        }
        check_counts();
        /* Walking large tables after every step would make big inputs
         * slow; small ones (most) are walked every time. */
        if (W.sessions.count + W.requests.count + W.upstream.count < 256 || op % 32 == 0)
            check_tables();
    }
    W.op = "end of input";
    check_tables();
}

/* ---- Reusing routers ---------------------------------------------------
 *
 * sb_router_init allocates and touches about 3.5 MiB; under ASan doing that
 * for every input costs more than the input itself (page faults on fresh
 * mappings). So one router per (workers, clients) is kept, and after each
 * input it is brought back to exactly the state sb_router_init leaves:
 * everything is dropped through the public API (the tables must then be
 * empty, every bucket and list head NIL), and the entries this input used,
 * the free lists and the sequence counter are restored. Every 64th reset
 * is compared byte for byte with a freshly initialised router. */

static struct {
    sb_router router;
    bool ready;
} cache[MAX_WORKERS][MAX_CLIENTS];

NO_COVERAGE static void check_all_nil(const int32_t *a, size_t n) {
    for (size_t i = 0; i < n; i++)
        CHECK(a[i] == -1);
}

NO_COVERAGE static void restore_slots(sb_slots *t) {
    CHECK(t->count == 0);
    check_all_nil(t->buckets, (size_t)t->bucket_mask + 1);
    for (int side = 0; side < SB_SLOT_SIDES; side++) {
        check_all_nil(t->head[side], (size_t)t->owners[side]);
        for (int i = 0; i < t->owners[side]; i++)
            CHECK(t->owned[side][i] == 0);
    }
    /* Entries are handed out from fresh_next up: those below it were used. */
    memset(t->entries, 0, (size_t)t->fresh_next * t->stride);
    memset(t->links, 0, (size_t)t->fresh_next * sizeof *t->links);
    t->free_head = -1;
    t->fresh_next = 0;
}

NO_COVERAGE static void restore_sessions(sb_sessions *t) {
    restore_slots(&t->slots);
}

NO_COVERAGE static void restore_pending(sb_pending *t) {
    restore_slots(&t->slots);
    t->next_seq = 0;
}

NO_COVERAGE static bool same_bytes(const void *a, const void *b, size_t n) {
    return memcmp(a, b, n) == 0;
}

NO_COVERAGE static void check_pristine(const sb_router *r, int workers, int clients) {
    sb_router fresh;
    CHECK(sb_router_init(&fresh, workers, clients) == STDIO_BUS_OK);
    const sb_slots *t[3] = {&r->sessions.slots, &r->requests.slots, &r->upstream.slots},
                   *ft[3] = {&fresh.sessions.slots, &fresh.requests.slots, &fresh.upstream.slots};
    for (int i = 0; i < 3; i++) {
        CHECK(t[i]->count == ft[i]->count && t[i]->capacity == ft[i]->capacity &&
              t[i]->stride == ft[i]->stride && t[i]->free_head == ft[i]->free_head &&
              t[i]->fresh_next == ft[i]->fresh_next && t[i]->bucket_mask == ft[i]->bucket_mask &&
              t[i]->owners[0] == ft[i]->owners[0] && t[i]->owners[1] == ft[i]->owners[1]);
        CHECK(same_bytes(t[i]->entries, ft[i]->entries, (size_t)t[i]->capacity * t[i]->stride));
        CHECK(same_bytes(t[i]->links, ft[i]->links, (size_t)t[i]->capacity * sizeof *t[i]->links));
        CHECK(same_bytes(t[i]->buckets, ft[i]->buckets,
                         ((size_t)t[i]->bucket_mask + 1) * sizeof *t[i]->buckets));
    }
    CHECK(r->requests.next_seq == fresh.requests.next_seq &&
          r->upstream.next_seq == fresh.upstream.next_seq);
    CHECK(same_bytes(r->running, fresh.running, (size_t)workers * sizeof *r->running));
    CHECK(r->rr_next == fresh.rr_next && r->worker_count == fresh.worker_count &&
          r->client_slots == fresh.client_slots);
    sb_router_fini(&fresh);
}

/* Drops what the input left (every worker exits, every client leaves) and
 * restores the initial state. */
static void router_restore(void) {
    static unsigned resets;
    W.op = "reset";
    for (int w = 0; w < W.workers; w++)
        worker_exit(w);
    for (int c = 0; c < W.clients; c++)
        client_disconnect(c);
    check_tables();
    for (int w = 0; w < W.workers; w++)
        CHECK(!W.router.running[w]);
    restore_sessions(&W.router.sessions);
    restore_pending(&W.router.requests);
    restore_pending(&W.router.upstream);
    W.router.rr_next = 0;
    if (++resets % 64 == 1)
        check_pristine(&W.router, W.workers, W.clients);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tokens_init();
    tracing = getenv("ROUTER_FUZZER_TRACE") != NULL;
    reader r = {data, size, 0};
    unsigned header = rd(&r);
    W.workers = 1 + (int)(header % MAX_WORKERS);
    W.clients = 1 + (int)((header / MAX_WORKERS) % MAX_CLIENTS);
    W.rr = 0;
    W.messages = 0;
    W.unique = 0;
    W.op = "init";
    for (int i = 0; i < MAX_WORKERS; i++)
        W.state[i] = W_STOPPED;
    for (int i = 0; i < MAX_CLIENTS; i++)
        W.connected[i] = false;
    ms_reset(&W.sessions);
    mp_reset(&W.requests);
    mp_reset(&W.upstream);

    if (!cache[W.workers - 1][W.clients - 1].ready) {
        CHECK(sb_router_init(&cache[W.workers - 1][W.clients - 1].router, W.workers, W.clients) ==
              STDIO_BUS_OK);
        cache[W.workers - 1][W.clients - 1].ready = true;
    }
    W.router = cache[W.workers - 1][W.clients - 1].router;
    if (tracing)
        fprintf(stderr, "-- %d worker(s), %d client slot(s)\n", W.workers, W.clients);
    CHECK(W.router.sessions.slots.capacity == CAP_SESSIONS);
    CHECK(W.router.requests.slots.capacity == CAP_PENDING &&
          W.router.upstream.slots.capacity == CAP_PENDING);
    /* Workers start not running (router.h); most inputs want them up. */
    for (int w = 0; w < W.workers; w++)
        if (!((header >> 5) & (1u << (w % 3))))
            worker_start(w);
    run(&r);
    router_restore();
    cache[W.workers - 1][W.clients - 1].router = W.router;
    return 0;
}
