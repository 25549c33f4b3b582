/* SPDX-License-Identifier: MIT */
/*
 * What a client learns that is not its own, with both context mechanisms —
 * secondary KFD contexts (the simulated KFD at uapi 1.19) and worker
 * processes (at 1.18):
 *  - `kfdbrokerctl status` run by an unprivileged user lists that user's
 *    contexts and the device context, never another user's context, its
 *    worker's pid or its mapped bytes (root still sees every one);
 *  - every address a kernel is given or can read for itself (its buffer
 *    arguments, kernel arguments, dispatch packet, pc) lies in the documented
 *    client address window, not where ASLR put the daemon or the worker;
 *  - a fault's message names the place relative to the client's own objects
 *    ("window offset 0x…", "pc offset 0x… of code object 0x…"), never an
 *    address of the daemon's or a worker's process;
 *  - a daemon that cannot reserve the window (something is mapped there)
 *    does not start, and says why.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compute-util.h"
#include "harness.h"
#include "kfdbroker.h"

/* docs/architecture.md "Client address window" (gpu/gpu.h). */
#define WINDOW_BASE 0x120000000000ULL
#define WINDOW_CLIENT_BASE 0x160000000000ULL
#define WINDOW_END 0x1e0000000000ULL

static TestDaemon d;
static char policydir[64];
static bool running;

static const char *const worker_mode[] = { "--sim-kfd-version=1.18", NULL };

static void start(const char *policy, const char *const *extra) {
        const char *args[12] = {};
        char arg[128], path[160];
        unsigned n = 0;

        compute_require_kernels();
        strcpy(policydir, "/tmp/kfdbroker-policy.XXXXXX");
        cr_assert(mkdtemp(policydir));
        cr_assert_eq(chmod(policydir, 0755), 0);
        if (policy) {
                FILE *f;

                snprintf(path, sizeof(path), "%s/50-test.conf", policydir);
                f = fopen(path, "we");
                cr_assert(f);
                fputs(policy, f);
                fclose(f);
        }
        snprintf(arg, sizeof(arg), "--policy-dir=%s", policydir);
        args[n++] = arg;
        for (unsigned i = 0; extra && extra[i] && n < 11; i++)
                args[n++] = extra[i];
        test_daemon_start(&d, args);
        running = true;
}

static void teardown(void) {
        char cmd[128];

        if (running) {
                test_daemon_fini(&d);
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", policydir);
                test_fini_expect(system(cmd) == 0, "%s failed", cmd);
                running = false;
        }
        test_fini_end();
}

TestSuite(leaks, .fini = teardown, .timeout = 300);

static kfdb_session *connect_session(const char *name) {
        kfdb_session *s = NULL;
        int r = kfdb_session_new(d.sock, name, &s);

        cr_assert_eq(r, 0, "%s: %s", name, strerror(-r));
        return s;
}

/* Runs tests/kernels/address.cl once on a buffer of size bytes: the
 * session's context comes up with that buffer (and the output's) mapped. */
static void bring_up_context(kfdb_session *s, size_t size) {
        kfdb_code_object *co = load_kernel(s, "address");
        uint64_t *out;
        void *map;
        uint32_t one = 1;
        kfdb_buffer *b = new_buffer(s, size, 0, &map), *bo = new_buffer(s, 4096, 0, (void **) &out);
        kfdb_arg args[] = { kfdb_arg_buffer(b, 0), kfdb_arg_buffer(bo, 0) };

        run_dispatch(s, co, "address", 1, &one, &one, args, 2);
        kfdb_code_object_free(co);
        /* The buffers stay: their mappings are what the context shows. */
}

/* The context of kind "session" with one user other than skip (0: none). */
static kfdb_gpu_context find_session_context(kfdb_session *s, uint64_t skip) {
        kfdb_gpu_context list[16];
        kfdb_gpu_contexts cs;

        cr_assert_eq(kfdb_gpu_contexts_get(s, &cs, list, 16), 0);
        for (size_t i = 0; i < cs.n && i < 16; i++)
                if (strcmp(list[i].kind, "session") == 0 && list[i].live && list[i].id != skip)
                        return list[i];
        cr_assert_fail("no live session context besides %" PRIu64, skip);
        return (kfdb_gpu_context) {};
}

/* A client of uid nobody, in a child process: brings up a context of its own
 * with a 12 KiB buffer mapped, says so on ready_fd, and keeps its session
 * until go_fd is closed. Plain exit codes: no criterion asserts in the child. */
static pid_t nobody_client(int *ret_ready_fd, int *ret_go_fd) {
        int ready[2], go[2];
        pid_t pid;

        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                kfdb_session *s = NULL;
                kfdb_code_object *co = NULL;
                kfdb_buffer *b = NULL, *bo = NULL;
                kfdb_batch *batch = NULL;
                uint32_t one = 1;
                uint64_t fence;
                char c = 'r';

                close(ready[0]);
                close(go[1]);
                if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                        _exit(10);
                if (kfdb_session_new(d.sock, "nobody", &s) < 0)
                        _exit(11);
                if (kfdb_code_object_load_file(s, kernel_path("address"), &co) < 0)
                        _exit(12);
                if (kfdb_buffer_alloc(s, 12288, KFDB_PLACEMENT_GTT, &b) < 0 ||
                    kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &bo) < 0)
                        _exit(13);
                kfdb_arg args[] = { kfdb_arg_buffer(b, 0), kfdb_arg_buffer(bo, 0) };
                if (kfdb_batch_new(s, &batch) < 0 || kfdb_batch_dispatch(batch, co, "address", 1, &one, &one, args, 2) < 0 ||
                    kfdb_batch_submit(batch, NULL, &fence) < 0 || kfdb_fence_wait(s, fence, DISPATCH_TIMEOUT_MS) < 0)
                        _exit(14);
                if (write(ready[1], &c, 1) != 1)
                        _exit(15);
                (void) !read(go[0], &c, 1); /* until the parent closes it */
                kfdb_session_free(s);
                _exit(0);
        }
        close(ready[1]);
        close(go[0]);
        *ret_ready_fd = ready[0];
        *ret_go_fd = go[1];
        return pid;
}

static void status_own_contexts(const char *const *extra, const char *mechanism) {
        const char *args[] = { "--socket", d.sock, "--json", "status", NULL };
        char *out = NULL, *err = NULL, want[128], c;
        kfdb_gpu_context mine, theirs;
        kfdb_gpu_contexts cs;
        int ready, go, status;
        kfdb_session *root;
        pid_t child;

        if (geteuid() != 0)
                cr_skip_test("needs root to run a client as nobody (65534)");
        start(NULL, extra);
        cr_assert_eq(chmod(d.dir, 0755), 0); /* nobody must reach the socket */
        root = connect_session("root-client");
        cr_assert_eq(kfdb_gpu_contexts_get(root, &cs, NULL, 0), 0);
        cr_assert_str_eq(cs.mechanism, mechanism, "%s", cs.reason);
        bring_up_context(root, 65536);
        mine = find_session_context(root, 0);

        child = nobody_client(&ready, &go);
        cr_assert_eq(read(ready, &c, 1), 1, "the nobody client did not bring up its context");
        theirs = find_session_context(root, mine.id);
        cr_assert_neq(mine.mapped_bytes, theirs.mapped_bytes);
        cr_assert_eq(mine.pid != 0, strcmp(mechanism, "process") == 0);

        /* nobody sees its own context in full and the device context, not root's. */
        cr_assert_eq(test_run_ctl(args, true, &out, &err), 0, "stderr: %s", err);
        snprintf(want, sizeof want, "{\"id\":%" PRIu64 ",\"kind\":\"session\",\"live\":true,\"users\":1,", theirs.id);
        cr_assert(strstr(out, want), "nobody does not see its own context %s in %s", want, out);
        snprintf(want, sizeof want, "\"mapped_bytes\":%" PRIu64 ",\"pid\":%" PRIu32 "}", theirs.mapped_bytes,
                 theirs.pid);
        cr_assert(strstr(out, want), "nobody's context is not shown in full (%s) in %s", want, out);
        cr_assert(strstr(out, "\"kind\":\"device\""), "%s", out);
        snprintf(want, sizeof want, "{\"id\":%" PRIu64 ",", mine.id);
        cr_assert_null(strstr(out, want), "nobody sees root's context %" PRIu64 ": %s", mine.id, out);
        snprintf(want, sizeof want, "\"mapped_bytes\":%" PRIu64 ",", mine.mapped_bytes);
        cr_assert_null(strstr(out, want), "nobody sees root's mapped bytes: %s", out);
        if (mine.pid) {
                snprintf(want, sizeof want, "\"pid\":%" PRIu32 "}", mine.pid);
                cr_assert_null(strstr(out, want), "nobody sees root's worker pid %u: %s", mine.pid, out);
        }
        /* Daemon-wide counts stay: root's, nobody's and kfdbrokerctl's own sessions. */
        cr_assert(strstr(out, "\"sessions\":3,"), "%s", out);
        free(out);
        free(err);

        /* Root sees both. */
        cr_assert_eq(test_run_ctl(args, false, &out, &err), 0, "stderr: %s", err);
        snprintf(want, sizeof want, "{\"id\":%" PRIu64 ",", mine.id);
        cr_assert(strstr(out, want), "%s", out);
        snprintf(want, sizeof want, "{\"id\":%" PRIu64 ",", theirs.id);
        cr_assert(strstr(out, want), "%s", out);
        free(out);
        free(err);

        close(go);
        close(ready);
        cr_assert_eq(waitpid(child, &status, 0), child);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the nobody client: status 0x%x", status);
        kfdb_session_free(root);
}

Test(leaks, status_shows_an_unprivileged_user_its_own_contexts_only) {
        status_own_contexts(NULL, "kernel");
}

Test(leaks, status_shows_an_unprivileged_user_its_own_contexts_only_with_workers) {
        status_own_contexts(worker_mode, "process");
}

/* Whether va lies in a mapping of process pid other than the client address
 * window (the line of /proc/PID/maps, in *ret_line). */
static bool outside_window_mapping(pid_t pid, uint64_t va, char *ret_line, size_t size) {
        char path[64], line[512];
        bool found = false;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/maps", (int) pid);
        f = fopen(path, "re");
        cr_assert_not_null(f, "%s", path);
        while (!found && fgets(line, sizeof(line), f)) {
                unsigned long long lo, hi;

                if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && va >= lo && va < hi &&
                    (lo < WINDOW_BASE || hi > WINDOW_END)) {
                        snprintf(ret_line, size, "%s", line);
                        found = true;
                }
        }
        fclose(f);
        return found;
}

static void kernel_pointers(const char *const *extra) {
        static const char *const names[] = { "its output buffer", "its other buffer", "its kernel arguments",
                                              "its dispatch packet", "its pc", "its hidden arguments" };
        kfdb_session *s;
        kfdb_code_object *co;
        kfdb_buffer *bo, *bx;
        kfdb_gpu_context ctx;
        uint64_t *out;
        void *x;
        uint32_t one = 1;
        char line[512];

        start(NULL, extra);
        s = connect_session("pointers");
        co = load_kernel(s, "pointers");
        bo = new_buffer(s, 4096, 0, (void **) &out);
        bx = new_buffer(s, 8192, 0, &x);
        kfdb_arg args[] = { kfdb_arg_buffer(bo, 0), kfdb_arg_buffer(bx, 0) };
        run_dispatch(s, co, "pointers", 1, &one, &one, args, 2);
        ctx = find_session_context(s, 0);

        for (unsigned i = 0; i < 6; i++) {
                cr_assert(out[i] >= WINDOW_CLIENT_BASE && out[i] < WINDOW_END,
                          "%s is at 0x%" PRIx64 ", outside the client contexts' window 0x%llx-0x%llx", names[i],
                          out[i], WINDOW_CLIENT_BASE, WINDOW_END);
                cr_assert(!outside_window_mapping(d.pid, out[i], line, sizeof line),
                          "%s (0x%" PRIx64 ") is in the daemon's mapping %s", names[i], out[i], line);
                if (ctx.pid)
                        cr_assert(!outside_window_mapping((pid_t) ctx.pid, out[i], line, sizeof line),
                                  "%s (0x%" PRIx64 ") is in the worker's mapping %s", names[i], out[i], line);
        }
        cr_assert_neq(out[0], out[1]);
        kfdb_code_object_free(co);
        kfdb_buffer_free(bo);
        kfdb_buffer_free(bx);
        kfdb_session_free(s);
}

Test(leaks, a_kernel_sees_addresses_in_the_client_window_only) {
        kernel_pointers(NULL);
}

Test(leaks, a_kernel_in_a_worker_sees_addresses_in_the_client_window_only) {
        kernel_pointers(worker_mode);
}

/* No hexadecimal number in text that could be an address of a process's
 * layout: nothing at or above the window's base (0x7f… included) but the
 * handles of the client's own objects. */
static void assert_no_absolute_address(const char *text) {
        for (const char *p = text; (p = strstr(p, "0x")); p += 2) {
                unsigned long long v = strtoull(p + 2, NULL, 16);
                bool handle = (p - text >= 7 && strncmp(p - 7, "object ", 7) == 0) ||
                              (p - text >= 7 && strncmp(p - 7, "buffer ", 7) == 0);
                cr_assert(handle || v < WINDOW_BASE, "an address in: %s", text);
        }
        cr_assert_null(strstr(text, "0x7f"), "%s", text);
}

static void fault_messages(const char *const *extra) {
        kfdb_session *s;
        kfdb_code_object *co, *ill;
        kfdb_buffer *b;
        kfdb_batch *batch;
        uint32_t one = 1, n = 64, *p;
        uint64_t off = 1ull << 28, fence; /* 1 GiB past the buffer: in the context's window, unmapped */
        char want[128];
        int r;

        start("[Match]\n[Limits]\nDispatchTimeout=500ms\n", extra);
        s = connect_session("faulter");
        co = load_kernel(s, "fault");
        b = new_buffer(s, 4096, 0, (void **) &p);
        kfdb_arg args[] = { kfdb_arg_buffer(b, 0), kfdb_arg_value(&off, 8) };
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "fault", 1, &one, &one, args, 2), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
        r = kfdb_fence_wait(s, fence, DISPATCH_TIMEOUT_MS);
        cr_assert_eq(r, -EFAULT, "got %d: %s", r, kfdb_session_last_error(s));
        kfdb_batch_free(batch);
        cr_assert(strstr(kfdb_session_last_error(s),
                         "GPU memory fault in dispatch of kernel \"fault\", at window offset 0x"),
                  "%s", kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), ", outside any buffer of yours"), "%s",
                  kfdb_session_last_error(s));
        assert_no_absolute_address(kfdb_session_last_error(s));

        /* What the device says about a queue it stopped names the pc in the
         * code object, not the address it was loaded at. */
        ill = load_kernel(s, "illegal");
        kfdb_arg iargs[] = { kfdb_arg_buffer(b, 0) };
        for (unsigned attempt = 0;
             attempt < 10 && !strstr(kfdb_session_last_error(s) ?: "", "the GPU had stopped it"); attempt++) {
                cr_assert_eq(kfdb_batch_new(s, &batch), 0);
                cr_assert_eq(kfdb_batch_dispatch(batch, ill, "illegal", 1, &n, &n, iargs, 1), 0);
                cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
                r = kfdb_fence_wait(s, fence, DISPATCH_TIMEOUT_MS);
                cr_assert_eq(r, -ETIME, "got %d: %s", r, kfdb_session_last_error(s));
                kfdb_batch_free(batch);
        }
        cr_assert(strstr(kfdb_session_last_error(s), "the GPU had stopped it: unsupported instruction v_dot2_f32_f16"),
                  "%s", kfdb_session_last_error(s));
        snprintf(want, sizeof want, " at pc offset 0x");
        cr_assert(strstr(kfdb_session_last_error(s), want), "%s", kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), " of code object 0x"), "%s", kfdb_session_last_error(s));
        assert_no_absolute_address(kfdb_session_last_error(s));

        kfdb_code_object_free(ill);
        kfdb_code_object_free(co);
        kfdb_buffer_free(b);
        kfdb_session_free(s);
}

Test(leaks, fault_messages_name_places_relative_to_the_clients_objects) {
        fault_messages(NULL);
}

Test(leaks, fault_messages_from_a_worker_name_places_relative_to_the_clients_objects) {
        fault_messages(worker_mode);
}

/* Something else mapped in the window before the daemon could reserve it (a
 * preloaded library here): the daemon does not start, and says why. */
Test(leaks, the_daemon_refuses_to_start_when_the_window_is_taken) {
        const char *daemon = getenv("KFDBROKERD");
        char dir[] = "/tmp/kfdbroker-window.XXXXXX", sock[128], log[4096] = "";
        int out[2], status;
        size_t n = 0;
        ssize_t k;
        pid_t pid;

        cr_assert_not_null(daemon, "KFDBROKERD is not set (run through meson test)");
        cr_assert(mkdtemp(dir));
        snprintf(sock, sizeof sock, "%s/sock", dir);
        cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                char asan[512];

                dup2(out[1], STDERR_FILENO);
                setenv("LD_PRELOAD", TAKE_WINDOW_SO, 1);
                /* An ASan-built daemon wants its runtime first in the list. */
                snprintf(asan, sizeof asan, "%s%sverify_asan_link_order=0", getenv("ASAN_OPTIONS") ?: "",
                         getenv("ASAN_OPTIONS") ? ":" : "");
                setenv("ASAN_OPTIONS", asan, 1);
                execl(daemon, daemon, "--no-config", "--device=sim", "--listen", sock, (char *) NULL);
                _exit(127);
        }
        close(out[1]);
        while (n + 1 < sizeof log && (k = read(out[0], log + n, sizeof log - 1 - n)) > 0)
                n += (size_t) k;
        log[n] = '\0';
        close(out[0]);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status 0x%x: %s", status, log);
        cr_assert(strstr(log, "Failed to reserve the client address window 0x120000000000-0x1e0000000000: "
                              "something is mapped there already"),
                  "%s", log);
        unlink(sock);
        rmdir(dir);
}
