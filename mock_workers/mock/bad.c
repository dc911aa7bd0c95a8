/* Bad output kinds (see bad.h and README.md). */
#include "bad.h"

#include <string.h>

#include "common/buf.h"

static void add_session(mc_buf *b, const char *sid_raw) {
    if (sid_raw)
        mc_buf_printf(b, ",\"sessionId\":%s", sid_raw);
}

bool mw_bad_emit(mw_out *out, mw_bad_kind kind, const char *id_raw, const char *sid_raw,
                 long bytes) {
    static const char binary[] = "\x00\x01\x02\x03\xff\xfe\xfd\x80\x81 binary \x00\n";
    bool replaces = false;
    bool newline = true;
    mc_buf b;
    mc_buf_init(&b);
    switch (kind) {
    case MW_BAD_NONJSON:
        mc_buf_puts(&b, "this is not json");
        break;
    case MW_BAD_TRUNCATED:
        mc_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"trunc", id_raw);
        break;
    case MW_BAD_NONEWLINE:
        mc_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}", id_raw);
        add_session(&b, sid_raw);
        mc_buf_puts(&b, "}");
        newline = false;
        replaces = true;
        break;
    case MW_BAD_BINARY:
        mc_buf_append(&b, binary, sizeof binary - 2); /* newline added below */
        break;
    case MW_BAD_BADUTF8:
        mc_buf_printf(
            &b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"text\":\"\xc3\x28\xa0\xa1\xff\"}",
            id_raw);
        add_session(&b, sid_raw);
        mc_buf_puts(&b, "}");
        replaces = true;
        break;
    case MW_BAD_LONGLINE: {
        /* Exactly `bytes` bytes before the newline (or the bare skeleton if
         * that is longer). */
        mc_buf tail;
        mc_buf_init(&tail);
        mc_buf_puts(&tail, "\"}");
        add_session(&tail, sid_raw);
        mc_buf_puts(&tail, "}");
        mc_buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"pad\":\"", id_raw);
        size_t skeleton = b.len + tail.len;
        if ((size_t)bytes > skeleton)
            mc_buf_fill(&b, 'x', (size_t)bytes - skeleton);
        mc_buf_append(&b, tail.data, tail.len);
        mc_buf_fini(&tail);
        replaces = true;
        break;
    }
    case MW_BAD_UNKNOWN_ID:
        mc_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":\"mock-unknown-id\",\"result\":{}");
        add_session(&b, sid_raw);
        mc_buf_puts(&b, "}");
        break;
    case MW_BAD_UNKNOWN_SESSION:
        mc_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
                        "\"params\":{\"level\":\"info\",\"data\":\"unknown session\"},"
                        "\"sessionId\":\"mock-unknown-session\"}");
        break;
    case MW_BAD_UNROUTABLE:
        mc_buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\","
                        "\"params\":{\"level\":\"info\",\"data\":\"no id, no session\"}}");
        break;
    }
    mw_out_bytes(out, b.data ? b.data : "", b.len, 1, 0, newline);
    mc_buf_fini(&b);
    return replaces;
}
