/* SPDX-License-Identifier: MIT */
/*
 * A client that lives through a daemon restart, for the systemd test
 * (tests/unit/core/nspawn-units.sh): it makes buffers with known contents,
 * an event and a job held on the GPU by that event, prints "ready", and waits
 * for a line on stdin — meanwhile the test runs `systemctl restart
 * kfdbrokerd`. Then it checks what docs/protocol.md "When the daemon
 * restarts" promises: the held job fails with ECANCELED, the contents are
 * intact, a copy between the same buffers works, the session reconnected
 * once. Prints "ok - ..." or "not ok - ..." lines; exits 0 when all are ok.
 *
 *   restart-client [SOCKET]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfdbroker.h"

#define WORDS (256u * 1024u)

static int failures;

static void check(int ok, const char *what, const kfdb_session *s) {
        printf("%s - %s%s%s\n", ok ? "ok" : "not ok", what, ok ? "" : ": ", ok ? "" : kfdb_session_last_error(s));
        failures += !ok;
}

static int fail(const char *what, int r, const kfdb_session *s) {
        printf("not ok - %s: %s (%s)\n", what, strerror(-r), s ? kfdb_session_last_error(s) : "");
        return 1;
}

int main(int argc, char *argv[]) {
        kfdb_session *s = NULL;
        kfdb_buffer *src = NULL, *dst = NULL;
        kfdb_event *gate = NULL;
        kfdb_batch *b = NULL;
        uint32_t *psrc, *pdst;
        uint64_t held, fence;
        char line[16];
        int r, ok;

        r = kfdb_session_new(argc > 1 ? argv[1] : NULL, "restart-client", &s);
        if (r < 0)
                return fail("connect", r, NULL);
        if ((r = kfdb_buffer_alloc(s, WORDS * 4, KFDB_PLACEMENT_GTT, &src)) < 0 ||
            (r = kfdb_buffer_alloc(s, WORDS * 4, KFDB_PLACEMENT_GTT, &dst)) < 0 ||
            (r = kfdb_buffer_map(src, (void **) &psrc)) < 0 || (r = kfdb_buffer_map(dst, (void **) &pdst)) < 0)
                return fail("buffers", r, s);
        for (uint32_t i = 0; i < WORDS; i++)
                psrc[i] = i * 2654435761u;
        memset(pdst, 0, WORDS * 4);
        if ((r = kfdb_event_create(s, false, &gate)) < 0 || (r = kfdb_batch_new(s, &b)) < 0 ||
            (r = kfdb_batch_wait_event(b, gate)) < 0 || (r = kfdb_batch_copy(b, dst, 0, src, 0, WORDS * 4)) < 0 ||
            (r = kfdb_batch_submit(b, NULL, &held)) < 0)
                return fail("the held job", r, s);
        printf("ready\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin))
                return fail("waiting for the restart", -EPIPE, s);

        r = kfdb_fence_wait(s, held, 30000);
        check(r == -ECANCELED, "the job held on the GPU fails with ECANCELED", s);
        ok = 1;
        for (uint32_t i = 0; i < WORDS; i++)
                ok &= psrc[i] == i * 2654435761u && pdst[i] == 0;
        check(ok, "the buffers' contents survived the restart", s);
        r = kfdb_batch_copy(b, dst, 0, src, 0, WORDS * 4);
        if (r >= 0)
                r = kfdb_batch_submit(b, NULL, &fence);
        if (r >= 0)
                r = kfdb_fence_wait(s, fence, 30000);
        check(r == 0, "a copy between the same buffers runs after the restart", s);
        ok = 1;
        for (uint32_t i = 0; i < WORDS; i++)
                ok &= pdst[i] == i * 2654435761u;
        check(ok, "the copy's data are right", s);
        check(kfdb_session_get_reconnects(s) == 1, "the session reconnected once", s);
        kfdb_session_free(s);
        return failures ? 1 : 0;
}
