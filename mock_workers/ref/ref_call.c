/* Requests in flight (see ref_call.h). A list: there are at most
 * REF_CALL_MAX of them and a reference worker favours the obvious. */
#include "ref_call.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/clock.h"

void ref_calls_init(ref_calls *c) {
    c->head = NULL;
    c->n = 0;
}

static void call_free(ref_call *call) {
    free(call->id);
    free(call->sid);
    free(call->token);
    free(call);
}

void ref_calls_fini(ref_calls *c) {
    while (c->head) {
        ref_call *next = c->head->next;
        call_free(c->head);
        c->head = next;
    }
    c->n = 0;
}

ref_call *ref_calls_add(ref_calls *c, ref_call_kind kind, const ref_origin *o) {
    if (c->n >= REF_CALL_MAX)
        return NULL;
    ref_call *call = mc_xcalloc(1, sizeof *call);
    call->kind = kind;
    call->id = o->id.p ? mc_xstrndup(o->id.p, o->id.n) : mc_xstrndup("null", 4);
    call->sid = o->sid.p ? mc_xstrndup(o->sid.p, o->sid.n) : NULL;
    call->batch = o->batch;
    call->slot = o->slot;
    /* Appended, so that matches and ties go to the oldest call first. */
    ref_call **tail = &c->head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = call;
    c->n++;
    return call;
}

void ref_calls_remove(ref_calls *c, ref_call *call) {
    for (ref_call **pp = &c->head; *pp; pp = &(*pp)->next) {
        if (*pp == call) {
            *pp = call->next;
            c->n--;
            call_free(call);
            return;
        }
    }
}

ref_origin ref_call_origin(const ref_call *call) {
    ref_origin o;
    o.id.p = call->id;
    o.id.n = strlen(call->id);
    o.sid.p = call->sid;
    o.sid.n = call->sid ? strlen(call->sid) : 0;
    o.batch = call->batch;
    o.slot = call->slot;
    return o;
}

/* Ids compare as JSON values, as a client names them in
 * notifications/cancelled: strings by content, numbers by value. */
static bool same_id(const char *raw, const cJSON *id) {
    cJSON *mine = cJSON_Parse(raw);
    bool same = false;
    if (mine && cJSON_IsString(mine) && cJSON_IsString(id))
        same = strcmp(mine->valuestring, id->valuestring) == 0;
    else if (mine && cJSON_IsNumber(mine) && cJSON_IsNumber(id))
        same = mine->valuedouble == id->valuedouble;
    cJSON_Delete(mine);
    return same;
}

static bool same_sid(const char *mine, ref_span sid) {
    if (!mine || !sid.p)
        return !mine && !sid.p;
    return strlen(mine) == sid.n && memcmp(mine, sid.p, sid.n) == 0;
}

ref_call *ref_calls_match(ref_calls *c, ref_call *after, const cJSON *id, ref_span sid) {
    for (ref_call *call = after ? after->next : c->head; call; call = call->next)
        if (same_sid(call->sid, sid) && same_id(call->id, id))
            return call;
    return NULL;
}

ref_call *ref_calls_find_sample(ref_calls *c, unsigned long seq) {
    for (ref_call *call = c->head; call; call = call->next)
        if (call->kind == REF_CALL_SAMPLE && call->seq == seq)
            return call;
    return NULL;
}

int64_t ref_calls_deadline(const ref_calls *c) {
    int64_t best = 0;
    for (const ref_call *call = c->head; call; call = call->next)
        if (call->kind == REF_CALL_SLOW)
            best = mc_clock_earliest(best, call->due_ns); /* due_ns > 0: after start */
    return best;
}
