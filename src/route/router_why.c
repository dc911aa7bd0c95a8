/* The reasons the router gives for a line it did not forward, as the
 * daemon logs them and puts them in its error answers to clients. */
#include "router.h"

const char *sb_router_why(sb_route_why why) {
    switch (why) {
    case SB_WHY_NONE:
        return "routed";
    case SB_WHY_NOT_JSON:
        return "not valid JSON";
    case SB_WHY_NOT_OBJECT:
        return "valid JSON but not an object";
    case SB_WHY_BAD_ID_TYPE:
        return "id is not a string, number or null";
    case SB_WHY_BAD_SESSION_TYPE:
        return "sessionId is not a string";
    case SB_WHY_BAD_METHOD_TYPE:
        return "method is not a string";
    case SB_WHY_ID_TOO_LONG:
        return "id longer than STDIO_BUS_MAX_REQUEST_ID_LEN";
    case SB_WHY_SESSION_TOO_LONG:
        return "sessionId longer than STDIO_BUS_MAX_SESSION_ID_LEN";
    case SB_WHY_NO_WORKER:
        return "no running worker";
    case SB_WHY_FOREIGN_SESSION:
        return "sessionId is owned by another client";
    case SB_WHY_SESSIONS_FULL:
        return "session table full (STDIO_BUS_MAX_SESSIONS)";
    case SB_WHY_PENDING_FULL:
        return "pending request table full (STDIO_BUS_MAX_PENDING_REQUESTS)";
    case SB_WHY_UNKNOWN_ID:
        return "response id not in the pending request table";
    case SB_WHY_CLIENT_GONE:
        return "the client that sent the request has disconnected";
    case SB_WHY_UNKNOWN_SESSION:
        return "sessionId not in the session table";
    case SB_WHY_UNROUTABLE:
        return "neither a response with an id nor a sessionId";
    case SB_WHY_NO_REQUEST:
        return "client response matches no request";
    case SB_WHY_WORKER_DOWN:
        return "the connection's worker is not running";
    case SB_WHY_UNBOUND_WORKER:
        return "no sessionId, and no client is bound to the worker";
    case SB_WHY_SHARED_WORKER:
        return "no sessionId, and several clients are bound to the worker";
    case SB_WHY_CLIENT_SHARE:
        return "the client has its share of the pending request table in flight";
    case SB_WHY_UPSTREAM_SHARE:
        return "the client owes answers to its share of worker requests";
    case SB_WHY_UPSTREAM_FULL:
        return "the table of worker requests awaiting client answers is full";
    case SB_WHY_NO_FREE_WORKER:
        return "every running worker is bound to another client";
    case SB_WHY_ID_IN_USE:
        return "an id of the same value is pending on the worker";
    }
    return "?";
}
