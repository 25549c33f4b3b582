/* SPDX-License-Identifier: MIT */
/* See relay-util.h. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "kfd/kfd-uapi.h"
#include "relay-util.h"
#include "sim/sim-remote.h"
#include "test-fini.h"

TestDaemon d;
char topo[2][64];
char policydir[64];

void relay_teardown(void) {
        char cmd[160];

        test_daemon_fini(&d);
        for (unsigned i = 0; i < 2; i++)
                if (topo[i][0]) {
                        snprintf(cmd, sizeof cmd, "rm -rf '%s'", topo[i]);
                        test_fini_expect(system(cmd) == 0, "%s failed", cmd);
                        topo[i][0] = 0;
                }
        if (policydir[0]) {
                snprintf(cmd, sizeof cmd, "rm -rf '%s'", policydir);
                test_fini_expect(system(cmd) == 0, "%s failed", cmd);
                policydir[0] = 0;
        }
        test_fini_end();
}



char *read_text(const char *dir, const char *name) {
        char path[256], *buf = calloc(1, 4097);
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        f = fopen(path, "re");
        cr_assert(f, "%s is missing: %m", path);
        fread(buf, 1, 4096, f);
        fclose(f);
        return buf;
}

int open_kfd(kfdb_session *s, unsigned slot, int *ret_fd, uint32_t *ret_minor) {
        int dir_fd, r;

        strcpy(topo[slot], "/tmp/kfdbroker-topo.XXXXXX");
        cr_assert(mkdtemp(topo[slot]));
        dir_fd = open(topo[slot], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert(dir_fd >= 0);
        r = kfdb_session_open_kfd(s, dir_fd, ret_fd, ret_minor);
        close(dir_fd);
        return r;
}

void relayed_open(Relayed *c, unsigned slot) {
        char *text;
        int fd;

        c->s = test_connect(&d, "relay");
        cr_assert_eq(open_kfd(c->s, slot, &fd, &c->minor), 0, "%s", kfdb_session_last_error(c->s));
        text = read_text(topo[slot], "topology/nodes/1/gpu_id");
        c->gpu_id = (uint32_t) strtoul(text, NULL, 10);
        free(text);
        cr_assert_eq(sim_remote_ops_new(fd, &c->ops), 0);
        c->kfd = c->ops->open_kfd(c->ops->userdata);
        cr_assert(c->kfd >= 0);
        c->render = c->ops->open_render(c->ops->userdata, c->minor);
        cr_assert(c->render >= 0, "render node %u: %s", c->minor, strerror(-c->render));
}

int kioctl(Relayed *c, unsigned long req, void *arg) {
        return c->ops->ioctl(c->ops->userdata, c->kfd, req, arg);
}

void relayed_close(Relayed *c) {
        sim_remote_ops_free(c->ops);
        kfdb_session_free(c->s);
}

uint64_t alloc_at(Relayed *c, uint64_t va, int *ret) {
        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = va, .size = 4096, .gpu_id = c->gpu_id,
                .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        };
        *ret = kioctl(c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a);
        return a.handle;
}

int map(Relayed *c, uint64_t handle) {
        uint32_t ids[1] = { c->gpu_id };
        struct kfd_ioctl_map_memory_to_gpu_args m = {
                .handle = handle, .device_ids_array_ptr = (uintptr_t) ids, .n_devices = 1,
        };
        return kioctl(c, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m);
}

void acquire(Relayed *c) {
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) c->render, .gpu_id = c->gpu_id };
        cr_assert_eq(kioctl(c, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
}

uint64_t alloc_size(Relayed *c, uint64_t va, uint64_t size, uint32_t flags, int *ret) {
        struct kfd_ioctl_alloc_memory_of_gpu_args a = { .va_addr = va, .size = size, .gpu_id = c->gpu_id,
                                                         .flags = flags };
        *ret = kioctl(c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a);
        return a.handle;
}


void start_with_limits(const char *limits) {
        char arg[128], path[160];
        const char *args[] = { arg, NULL };
        FILE *f;

        strcpy(policydir, "/tmp/kfdbroker-policy.XXXXXX");
        cr_assert(mkdtemp(policydir));
        snprintf(path, sizeof path, "%s/50-relay.conf", policydir);
        f = fopen(path, "we");
        cr_assert(f);
        fprintf(f, "[Limits]\n%s", limits);
        fclose(f);
        snprintf(arg, sizeof arg, "--policy-dir=%s", policydir);
        test_daemon_start(&d, args);
}

pid_t logged_worker(void) {
        const char *key = "the KFD process of worker ";
        char *log = test_daemon_read_log(&d), *at = NULL;
        long pid = 0;

        for (char *p = strstr(log, key); p; p = strstr(p + 1, key))
                at = p;
        if (at)
                pid = strtol(at + strlen(key), NULL, 10);
        free(log);
        return (pid_t) pid;
}
