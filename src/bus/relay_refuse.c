/* Telling a client it is refused (SB-X-21, SB-X-24): one JSON-RPC
 * notification, stdio_bus/refused, before the daemon closes it. */
#include "client_state.h"
#include "relay.h"

#include <stdio.h>
#include <unistd.h>

static int refusal(char *line, size_t size, const char *why) {
    int n = snprintf(line, size,
                     "{\"jsonrpc\":\"2.0\",\"method\":\"stdio_bus/refused\",\"params\":{"
                     "\"message\":\"stdio_bus: %s\"}}\n",
                     why);
    return n > 0 && (size_t)n < size ? n : 0;
}

/* SB-X-21: a client the daemon closes before it could be served is told
 * why, in one notification written now (a fresh connection's socket buffer
 * holds it), since nothing of it is pending to answer with an error. */
void sb_relay_notify_refused(sb_client *client, const char *why) {
    char line[512];
    int n = refusal(line, sizeof line, why);
    if (n && client->peer.out_fd >= 0) {
        ssize_t w = write(client->peer.out_fd, line, (size_t)n);
        (void)w; /* best effort: the connection is closed next either way */
    }
}

void sb_relay_refuse(sb_bus *d, sb_client *client, const char *why) {
    char line[512];
    int n = refusal(line, sizeof line, why);
    if (n)
        sb_relay_send(d, &client->peer, line, (size_t)n, NULL);
    sb_client_enter(d, client, SB_CLIENT_CLOSING);
    if (!client->peer.dirty)
        sb_relay_close_if_flushed(d, client);
}
