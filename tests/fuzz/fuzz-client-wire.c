/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the client library's reply decoder (client/client-wire.c):
 * what a malicious or broken daemon could send to every client. Decoding
 * either fails with -EBADMSG/-EMSGSIZE/-ENOMEM or yields a reply whose
 * strings and arrays can be read in full.
 *
 * Built as a libFuzzer target with -Dfuzz=true (clang), otherwise with
 * fuzz-main.c as a program that replays the files given on its command line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client-wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "fuzz-client-wire: broken promise: %s\n", what);
                abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ClientReply *r = NULL;
        volatile size_t sum = 0;
        int k;

        k = client_reply_decode(data, size, &r);
        if (k < 0) {
                check(k == -EBADMSG || k == -EMSGSIZE || k == -ENOMEM, "undocumented errno");
                return 0;
        }
        check(r->error >= 0, "negative error accepted");
        sum += strlen(r->message);
        switch (r->type) {
        case CLIENT_REPLY_HELLO:
                sum += strlen(r->hello.daemon_version);
                for (size_t i = 0; i < r->hello.n_features; i++)
                        sum += strlen(r->hello.features[i]);
                break;
        case CLIENT_REPLY_WAIT_EVENTS:
                for (size_t i = 0; i < r->wait_events.n_entries; i++)
                        sum += r->wait_events.entries[i].last_event_age;
                break;
        case CLIENT_REPLY_SUBMIT:
                for (size_t i = 0; i < r->submit.n_fences; i++)
                        sum += r->submit.fences[i];
                break;
        case CLIENT_REPLY_JOB_FAILED:
                check(r->job_failed.error > 0, "job failure without errno");
                sum += strlen(r->job_failed.message);
                break;
        case CLIENT_REPLY_STATUS:
                sum += strlen(r->status.daemon_version) + strlen(r->status.backend) +
                       strlen(r->status.gfx_name);
                break;
        case CLIENT_REPLY_DEVICE_INFO:
                sum += strlen(r->device_info.backend) + strlen(r->device_info.name);
                break;
        case CLIENT_REPLY_LOAD_CODE_OBJECT:
                for (size_t i = 0; i < r->load_code_object.n_kernels; i++) {
                        const ClientKernelInfo *ki = &r->load_code_object.kernels[i];
                        sum += strlen(ki->name);
                        for (size_t a = 0; a < ki->n_args; a++) {
                                check(ki->args[a].offset <= UINT32_MAX - ki->args[a].size, "argument wraps");
                                sum += strlen(ki->args[a].name) + strlen(ki->args[a].kind);
                        }
                }
                break;
        default:
                break;
        }
        check(r->n_fds == 0, "fds out of nowhere");
        client_reply_free(r);
        return 0;
}
