/* SPDX-License-Identifier: MIT */
/*
 * The interposer's own logic (interposer/interposer.c), without ROCr and
 * without preloading (so that it also runs under ASan): which paths are the
 * broker's, the fake fds (real fds, several per /dev/kfd, dup/close), the
 * ioctl argument copied by the size its request encodes, a bad pointer or a
 * garbage request answered with an errno, fork, mmap of a buffer, and a
 * WAIT_EVENTS asleep in one thread while another thread's calls go on. The
 * KFD process behind it is a real one: the simulated GPU served in this
 * process over sim-remote, as the daemon serves an OpenKfd.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interposer.h"
#include "kfd/kfd-uapi.h"
#include "sim/sim-device.h"
#include "sim/sim-remote.h"
#include "sim/sim.h"
#include "test-fini.h"

static SimDevice *dev;
static char dir[64];

static void setup_kfd(uint32_t kfd_minor) {
        char link[128];
        int sv[2];

        cr_assert_eq(sim_device_new(&(SimOptions) { .kfd_minor = kfd_minor }, &dev), 0);
        strcpy(dir, "/tmp/kfdi-test.XXXXXX");
        cr_assert(mkdtemp(dir));
        snprintf(link, sizeof link, "%s/kfd", dir);
        cr_assert_eq(symlink(sim_device_get_ops(dev)->sysfs_root, link), 0);
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        cr_assert_eq(sim_remote_serve(dev, sv[0]), 0);
        cr_assert_eq(kfdi_attach_relay(sv[1], dir, 128), 0);
}

static void setup(void) {
        setup_kfd(0);
}

/* A KFD that imports no dma-buf but amdgpu's (before 1.15). */
static void setup_kfd_1_14(void) {
        setup_kfd(14);
}

static void teardown(void) {
        char path[128];

        kfdi_reset();
        sim_device_free(dev);
        snprintf(path, sizeof path, "%s/kfd", dir);
        unlink(path);
        rmdir(dir);
        test_fini_end();
}

TestSuite(interposer, .init = setup, .fini = teardown, .timeout = 60);

static int get_version(int fd, struct kfd_ioctl_get_version_args *v) {
        return kfdi_ioctl(fd, AMDKFD_IOC_GET_VERSION, v);
}

static uint32_t gpu_id(void) {
        char path[160], buf[32] = "";
        FILE *f;

        snprintf(path, sizeof path, "%s/kfd/topology/nodes/1/gpu_id", dir);
        f = fopen(path, "re");
        cr_assert(f);
        cr_assert(fgets(buf, sizeof buf, f));
        fclose(f);
        return (uint32_t) strtoul(buf, NULL, 10);
}

Test(interposer, paths_of_the_broker_and_none_else) {
        unsigned minor = 0;
        char buf[256];

        cr_expect_eq(kfdi_path_kind("/dev/kfd", NULL), KFDI_PATH_KFD);
        cr_expect_eq(kfdi_path_kind("/dev/dri/renderD128", &minor), KFDI_PATH_RENDER);
        cr_expect_eq(minor, 128);
        for (const char *const *p = (const char *const[]) { "/dev/kfdx", "/dev/kfd/", "dev/kfd", "/dev/dri/renderD",
                                                            "/dev/dri/renderD12x", "/dev/dri/card0",
                                                            "/sys/devices/virtual/kfd/kfdx", "/sys/module/amdgpux",
                                                            "/sys/module", "", NULL };
             *p; p++)
                cr_expect_eq(kfdi_path_kind(*p, NULL), KFDI_PATH_OTHER, "%s", *p);
        cr_expect_eq(kfdi_path_kind(NULL, NULL), KFDI_PATH_OTHER);

        cr_expect_eq(kfdi_path("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties", NULL, buf, sizeof buf),
                     KFDI_PATH_TOPOLOGY);
        cr_expect_str_eq(buf, strcat(strcpy((char[256]) {}, dir), "/kfd/topology/nodes/1/properties"));
        cr_expect_eq(kfdi_path("/sys/class/kfd/kfd", NULL, buf, sizeof buf), KFDI_PATH_TOPOLOGY);
        cr_expect_str_eq(buf, strcat(strcpy((char[256]) {}, dir), "/kfd"));
        cr_expect_eq(kfdi_path("/sys/module/amdgpu/initstate", NULL, buf, sizeof buf), KFDI_PATH_TOPOLOGY);
        cr_expect_str_eq(buf, strcat(strcpy((char[256]) {}, dir), "/amdgpu/initstate"));
        cr_expect_eq(kfdi_path("/sys/devices/virtual/kfd/kfd/topology", NULL, buf, 8), -ENAMETOOLONG);
}

Test(interposer, every_open_of_dev_kfd_is_the_one_kfd_process) {
        struct kfd_ioctl_get_version_args v = {};
        int a, b, c;

        a = kfdi_open(KFDI_PATH_KFD, 0, O_RDWR | O_CLOEXEC);
        b = kfdi_open(KFDI_PATH_KFD, 0, O_RDWR);
        cr_assert(a >= 0 && b >= 0 && a != b);
        cr_expect(kfdi_is_fake(a) && kfdi_is_fake(b));
        cr_expect(fcntl(a, F_GETFD) & FD_CLOEXEC);
        cr_expect(!(fcntl(b, F_GETFD) & FD_CLOEXEC));
        cr_expect_eq(get_version(a, &v), 0);
        cr_expect_eq(v.major_version, 1);

        /* dup of a fake fd is a fake fd of the same file. */
        c = dup(b);
        cr_assert(c >= 0);
        cr_assert_eq(kfdi_dup_to(b, c), 0);
        cr_expect_eq(get_version(c, &v), 0);

        /* close one: the others go on; the closed number is no fake any more. */
        close(a);
        kfdi_forget(a);
        cr_expect(!kfdi_is_fake(a));
        cr_expect_eq(get_version(a, &v), -EBADF);
        close(b);
        kfdi_forget(b);
        cr_expect_eq(get_version(c, &v), 0);

        /* dup2 of another file onto a fake fd: it stops being one. */
        a = kfdi_open(KFDI_PATH_KFD, 0, O_RDWR);
        cr_assert_eq(dup2(STDERR_FILENO, a), a);
        kfdi_forget(a);
        cr_expect(!kfdi_is_fake(a));
        close(a);

        /* close_range over fakes. */
        kfdi_forget_range((unsigned) c, (unsigned) c);
        cr_expect(!kfdi_is_fake(c));
        close(c);

        /* Still the same KFD process: a new open works. */
        a = kfdi_open(KFDI_PATH_KFD, 0, O_RDWR);
        cr_expect_eq(get_version(a, &v), 0);
}

Test(interposer, ioctl_arguments_by_the_size_the_request_encodes) {
        int kfd = kfdi_open(KFDI_PATH_KFD, 0, O_RDWR), render;
        uint8_t buf[8];
        struct kfd_ioctl_acquire_vm_args vm = {};
        void *none;

        cr_assert(kfd >= 0);
        /* A GET_VERSION whose word says 4 bytes: only 4 come back. */
        memset(buf, 0xee, sizeof buf);
        cr_expect_eq(kfdi_ioctl(kfd, _IOC(_IOC_READ, 'K', 0x01, 4), buf), 0);
        cr_expect_eq(buf[0], 1, "major_version");
        cr_expect_eq(buf[4], 0xee, "written past the size the request encodes");

        /* A pointer to memory that is not there: -EFAULT, as copy_from_user. */
        none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        cr_assert(none != MAP_FAILED);
        cr_expect_eq(kfdi_ioctl(kfd, AMDKFD_IOC_GET_VERSION, none), -EFAULT);
        cr_expect_eq(kfdi_ioctl(kfd, AMDKFD_IOC_SET_MEMORY_POLICY, none), -EFAULT);
        munmap(none, 4096);

        /* Garbage: a number past the table, a request on a number that is no fake. */
        cr_expect_lt(kfdi_ioctl(kfd, _IOWR('K', 0x7e, uint64_t), buf), 0);
        cr_expect(errno == errno); /* the call returned, the process goes on */
        cr_expect_eq(kfdi_ioctl(STDIN_FILENO, AMDKFD_IOC_GET_VERSION, buf), -EBADF);

        /* The render node named in ACQUIRE_VM is translated; another fd is no render node. */
        vm.gpu_id = gpu_id();
        vm.drm_fd = (uint32_t) STDERR_FILENO;
        cr_expect_eq(kfdi_ioctl(kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), -EINVAL);
        cr_expect_eq(kfdi_open(KFDI_PATH_RENDER, 129, O_RDWR), -ENOENT, "only the topology's render node");
        render = kfdi_open(KFDI_PATH_RENDER, 128, O_RDWR);
        cr_assert(render >= 0);
        vm.drm_fd = (uint32_t) render;
        cr_expect_eq(kfdi_ioctl(kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
        cr_expect_eq(vm.drm_fd, (uint32_t) render, "the caller's fd number is left as it was");
}

Test(interposer, a_forked_child_gets_ebadf) {
        struct kfd_ioctl_get_version_args v = {};
        int kfd = kfdi_open(KFDI_PATH_KFD, 0, O_RDWR), status;
        pid_t pid;

        cr_assert(kfd >= 0);
        pthread_atfork(NULL, NULL, kfdi_after_fork_child);
        pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
                /* No daemon at this socket: the child's own open fails
                 * (it never falls back on the parent's KFD process). */
                setenv("KFDBROKER_SOCKET", "/nonexistent/kfdbroker.sock", 1);
                int r = get_version(kfd, &v) == -EBADF ? 0 : 1;
                if (kfdi_open(KFDI_PATH_KFD, 0, O_RDWR) >= 0)
                        r |= 2;
                close(kfd);
                kfdi_forget(kfd);
                _exit(r);
        }
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
        cr_expect_eq(get_version(kfd, &v), 0, "the parent goes on");
}

Test(interposer, a_buffer_mapped_at_its_va_and_not_into_a_child) {
        int kfd = kfdi_open(KFDI_PATH_KFD, 0, O_RDWR), render = kfdi_open(KFDI_PATH_RENDER, 128, O_RDWR);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) render, .gpu_id = gpu_id() };
        struct kfd_ioctl_alloc_memory_of_gpu_args a = { .size = 8192, .gpu_id = vm.gpu_id,
                                                         .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT |
                                                                  KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE };
        char line[256], *want;
        void *va, *m = NULL;
        bool dontfork = false;
        FILE *f;

        cr_assert_eq(kfdi_ioctl(kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
        va = mmap(NULL, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        cr_assert(va != MAP_FAILED);
        a.va_addr = (uintptr_t) va;
        cr_assert_eq(kfdi_ioctl(kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), 0);
        cr_assert_eq(kfdi_mmap(va, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, render,
                               (off_t) a.mmap_offset, &m),
                     0);
        cr_expect_eq(m, va, "CPU VA == GPU VA");
        strcpy(m, "hello");
        cr_expect_str_eq((char *) va, "hello");
        cr_expect_eq(kfdi_mmap(va, 8192, PROT_READ, MAP_SHARED, render, (off_t) a.mmap_offset + (1ULL << 40), &m),
                     -EINVAL, "an offset that is no buffer's");

        /* MADV_DONTFORK: "dc" among the mapping's VmFlags. */
        f = fopen("/proc/self/smaps", "re");
        cr_assert(f);
        cr_assert(asprintf(&want, "%lx-", (unsigned long) (uintptr_t) va) > 0);
        for (bool in = false; fgets(line, sizeof line, f);) {
                if (strncmp(line, want, strlen(want)) == 0)
                        in = true;
                else if (in && strncmp(line, "VmFlags:", 8) == 0) {
                        dontfork = strstr(line, " dc") != NULL;
                        break;
                }
        }
        fclose(f);
        free(want);
        cr_expect(dontfork, "the buffer's mapping would go into a child");
        munmap(va, 8192);
}

typedef struct Waiter {
        int kfd;
        uint32_t event_id;
        int r;
        uint32_t result;
} Waiter;

static void *wait_thread(void *userdata) {
        Waiter *w = userdata;
        struct kfd_event_data ev = { .event_id = w->event_id };
        struct kfd_ioctl_wait_events_args a = {
                .events_ptr = (uintptr_t) &ev, .num_events = 1, .wait_for_all = 1, .timeout = 60000,
        };

        w->r = kfdi_ioctl(w->kfd, AMDKFD_IOC_WAIT_EVENTS, &a);
        w->result = a.wait_result;
        return NULL;
}

Test(interposer, wait_events_asleep_holds_up_no_other_thread) {
        int kfd = kfdi_open(KFDI_PATH_KFD, 0, O_RDWR), render = kfdi_open(KFDI_PATH_RENDER, 128, O_RDWR);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) render, .gpu_id = gpu_id() };
        struct kfd_ioctl_create_event_args ce = { .event_type = KFD_IOC_EVENT_SIGNAL };
        struct kfd_ioctl_get_version_args v = {};
        struct kfd_ioctl_set_event_args se = {};
        Waiter w = { .kfd = kfd, .r = 1 };
        pthread_t t;

        cr_assert_eq(kfdi_ioctl(kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
        cr_assert_eq(kfdi_ioctl(kfd, AMDKFD_IOC_CREATE_EVENT, &ce), 0);
        w.event_id = ce.event_id;
        cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
        /* While it sleeps (or before it starts: either way the event is
         * unset until we set it), 100 calls of this thread return. */
        for (int i = 0; i < 100; i++)
                cr_assert_eq(get_version(kfd, &v), 0);
        se.event_id = ce.event_id;
        cr_assert_eq(kfdi_ioctl(kfd, AMDKFD_IOC_SET_EVENT, &se), 0);
        pthread_join(t, NULL);
        cr_expect_eq(w.r, 0);
        cr_expect_eq(w.result, KFD_IOC_WAIT_RESULT_COMPLETE);
}

TestSuite(interposer_kfd_1_14, .init = setup_kfd_1_14, .fini = teardown, .timeout = 60);

/* User memory the thunk registers (USERPTR) moves onto pages the daemon can
 * reach, in place with its contents: a memfd imported as another driver's
 * dma-buf where the KFD imports those (1.15), else, as here, a GTT buffer of
 * the process allocated at its VA and mapped over it. */
Test(interposer_kfd_1_14, user_memory_moves_onto_a_gtt_buffer_where_foreign_dma_bufs_cannot_be_imported) {
        int kfd = kfdi_open(KFDI_PATH_KFD, 0, O_RDWR), render = kfdi_open(KFDI_PATH_RENDER, 128, O_RDWR);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) render, .gpu_id = gpu_id() };
        struct kfd_ioctl_alloc_memory_of_gpu_args a = { .size = 3 * 4096, .gpu_id = vm.gpu_id,
                                                         .flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR |
                                                                  KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE };
        uint32_t ids[1] = { vm.gpu_id };
        struct kfd_ioctl_map_memory_to_gpu_args map = { .device_ids_array_ptr = (uintptr_t) ids, .n_devices = 1 };
        char line[256], *want;
        bool on_a_buffer = false;
        uint8_t *mem;
        FILE *f;

        cr_assert_eq(kfdi_ioctl(kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
        mem = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        cr_assert(mem != MAP_FAILED);
        for (unsigned i = 0; i < a.size; i++)
                mem[i] = (uint8_t) (i * 7);
        a.va_addr = a.mmap_offset = (uintptr_t) mem;
        int r = kfdi_ioctl(kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a);
        cr_assert_eq(r, 0, "the thunk's registration works: %s", strerror(-r));
        map.handle = a.handle;
        cr_expect_eq(kfdi_ioctl(kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &map), 0, "a buffer of the process");
        for (unsigned i = 0; i < a.size; i++)
                if (mem[i] != (uint8_t) (i * 7)) {
                        cr_expect_fail("byte %u changed in the move", i);
                        break;
                }
        /* The range is the simulator's buffer now (its memfd, sim-memory.c). */
        f = fopen("/proc/self/maps", "re");
        cr_assert(f);
        cr_assert(asprintf(&want, "%lx-", (unsigned long) (uintptr_t) mem) > 0);
        while (fgets(line, sizeof line, f))
                if (strncmp(line, want, strlen(want)) == 0)
                        on_a_buffer = strstr(line, "kfd-bo:") != NULL;
        fclose(f);
        free(want);
        cr_expect(on_a_buffer, "the range is mapped from a buffer of the process");
        munmap(mem, a.size);
}
