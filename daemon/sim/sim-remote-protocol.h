/* SPDX-License-Identifier: MIT */
/*
 * The wire of sim-remote (sim-remote.h): the messages a remote simulated
 * process (sim-remote-client.c) and the daemon's server
 * (sim-remote-server.c) exchange over connected AF_UNIX SOCK_SEQPACKET
 * sockets, and the send/receive helpers both sides use. Kept apart from the
 * two ends so that both read one description of every message, and so that
 * tests can speak it directly (tests/unit/sim/test-sim-remote.c).
 *
 * Channels. The socket handed to sim_remote_serve() is the control channel:
 * HELLO (the handshake), then only NEW_CHANNEL, each carrying one end of a
 * fresh socketpair in SCM_RIGHTS. Every other request travels on such a
 * channel, strictly one request and its reply at a time; the server runs one
 * thread per channel, so a WAIT_EVENTS asleep on one channel holds up no other.
 * The control channel stands for the process: when it ends (EOF, error or a
 * malformed message) the process is gone and the server tears it down.
 *
 * Messages. A request is a SimRemoteRequest followed by arg_size bytes (the
 * ioctl argument: the caller's _IOC_SIZE bytes, which are the caller's own
 * when the kernel copies them in and zeros otherwise — the direction is the
 * kernel's table's, sim_remote_ioctl_dir(), not the caller's word's) and then
 * the array its ioctl carries (WAIT_EVENTS events, MAP/UNMAP device ids),
 * exactly as long as the argument says. A reply is a SimRemoteReply followed
 * by arg_size bytes (the argument back, exactly when the kernel copies it
 * out) and the array out (WAIT_EVENTS
 * events, apertures, dma-buf metadata; the exception text; the sysfs path of
 * HELLO). At most one fd travels with a message, and only where the op takes
 * one. Anything else — a short or long message, an unknown op or flag, an
 * array longer than its bound, an fd where none belongs — is a protocol error
 * that ends the channel. Files are named by the daemon's fd numbers; the
 * client translates its own.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define SIM_REMOTE_MAGIC 0x524d4953u   /* "SIMR" */
/* 2: the argument travels in the kernel's direction (sim_remote_ioctl_dir()),
 * no longer in the caller's word's; a peer of version 1 would read or answer
 * a word of the wrong direction otherwise, so HELLO refuses it. */
#define SIM_REMOTE_VERSION 2u

/* Bounds, on both sides: a message (a whole ioctl argument — _IOC_SIZE is 14
 * bits — plus the largest array) and each array. */
#define SIM_REMOTE_MAX_MESSAGE (96u * 1024u)
#define SIM_REMOTE_MAX_ARG 16383u                    /* (1 << _IOC_SIZEBITS) - 1 */
#define SIM_REMOTE_MAX_WAIT_EVENTS 1024u             /* 48 KiB of kfd_event_data */
#define SIM_REMOTE_MAX_DEVICE_IDS 1024u
#define SIM_REMOTE_MAX_APERTURES 64u
#define SIM_REMOTE_MAX_METADATA 4096u
#define SIM_REMOTE_MAX_PATH 4096u
#define SIM_REMOTE_MAX_TILE_CONFIGS 64u              /* each of GET_TILE_CONFIG's arrays (gfx: 32 and 16) */
#define SIM_REMOTE_MAX_CU_MASK 32u                   /* u32 of SET_CU_MASK's mask: the kernel reads 1024 bits */
#define SIM_REMOTE_MAX_INFO 4096u                    /* bytes of an AMDGPU_INFO answer (DEV_INFO: ~400) */
#define SIM_REMOTE_MAX_VERSION_FIELD 256u            /* bytes of each DRM_IOCTL_VERSION string ("amdgpu") */
/* Channels a process may open besides the control channel. */
#define SIM_REMOTE_MAX_CHANNELS 64u

typedef enum SimRemoteOp {
        SIM_REMOTE_OP_HELLO = 1,       /* u64[0] = magic | version << 32 -> reply: same, sysfs root */
        SIM_REMOTE_OP_NEW_CHANNEL,     /* + fd: a channel's socket -> 0, -EMFILE past the bound */
        SIM_REMOTE_OP_OPEN_KFD,        /* -> the daemon's fd number + fd: a copy of the file */
        SIM_REMOTE_OP_OPEN_RENDER,     /* u64[0] = minor -> as OPEN_KFD */
        SIM_REMOTE_OP_CLOSE,           /* fd */
        SIM_REMOTE_OP_IOCTL,           /* fd, u64[0] = request, argument, array; + fd (IMPORT_DMABUF,
                                        * GET_DMABUF_INFO) -> argument out, array out; + fd (EXPORT_DMABUF) */
        SIM_REMOTE_OP_MMAP,            /* fd, u64[0] = length, u64[1] = offset -> u64[0] = offset in the
                                        * memfd + fd: the memfd */
        SIM_REMOTE_OP_EXCEPTION_INFO,  /* fd, u64[0] = buflen -> u64[0] = queue id, text */
        SIM_REMOTE_OP_DOORBELL,        /* fd, u64[0] = queue id -> 0 (KfdOps.doorbell_written) */
        _SIM_REMOTE_OP_MAX,
} SimRemoteOp;

/* SimRemoteRequest.flags */
#define SIM_REMOTE_ARG_NULL 0x1u       /* IOCTL: the caller passed arg = NULL */

typedef struct SimRemoteRequest {
        uint32_t op;
        uint32_t flags;
        int32_t fd;
        uint32_t arg_size;
        uint64_t u64[2];
} SimRemoteRequest;

typedef struct SimRemoteReply {
        int32_t ret;                   /* 0, a file number or a negative errno */
        uint32_t arg_size;
        uint64_t u64[2];
} SimRemoteReply;

/*
 * How an ioctl's argument travels. PLAIN: the struct is all (no field is a
 * pointer or an fd of the caller). The others name the fields each side
 * rewrites: pointers become the server's own buffers, fd numbers the daemon's.
 */
typedef enum SimRemoteIoctlKind {
        SIM_REMOTE_IOCTL_PLAIN,
        SIM_REMOTE_IOCTL_ACQUIRE_VM,     /* drm_fd: a file of this table (client translates) */
        SIM_REMOTE_IOCTL_APERTURES,      /* kfd_process_device_apertures_ptr: num_of_nodes entries out */
        SIM_REMOTE_IOCTL_MAP,            /* device_ids_array_ptr: n_devices ids in (MAP and UNMAP) */
        SIM_REMOTE_IOCTL_WAIT_EVENTS,    /* events_ptr: num_events kfd_event_data in and out */
        SIM_REMOTE_IOCTL_IMPORT_DMABUF,  /* dmabuf_fd in */
        SIM_REMOTE_IOCTL_DMABUF_INFO,    /* dmabuf_fd in, metadata_ptr: metadata_size bytes out */
        SIM_REMOTE_IOCTL_EXPORT_DMABUF,  /* dmabuf_fd out */
        SIM_REMOTE_IOCTL_PRIME_TO_FD,    /* DRM_IOCTL_PRIME_HANDLE_TO_FD on a render fd: fd out */
        SIM_REMOTE_IOCTL_TILE_CONFIG,    /* tile_config_ptr, macro_tile_config_ptr: num_tile_configs then
                                          * num_macro_tile_configs u32 out, in one array */
        SIM_REMOTE_IOCTL_CU_MASK,        /* cu_mask_ptr: num_cu_mask / 32 u32 in (at most 32) */
        SIM_REMOTE_IOCTL_DRM_VERSION,    /* DRM_IOCTL_VERSION: name, date, desc out, each at most
                                          * SIM_REMOTE_MAX_VERSION_FIELD of its length, in one array */
        SIM_REMOTE_IOCTL_AMDGPU_INFO,    /* DRM_IOCTL_AMDGPU_INFO: return_pointer's return_size bytes
                                          * (at most SIM_REMOTE_MAX_INFO) in and out — in, so that bytes the
                                          * answer does not reach stay the caller's */
        SIM_REMOTE_IOCTL_REFUSED,        /* simulated, with fields this wire does not carry */
} SimRemoteIoctlKind;

/*
 * The kind of an ioctl request word. KFD requests go by their number
 * (_IOC_NR), as kfd_ioctl dispatches; the render node's GEM calls
 * (sim-drm.h) by their whole word, as the simulator runs them — so a word
 * the simulator would run on a render fd is never carried as PLAIN, and
 * one it would run on a KFD fd is classified by its number.
 */
SimRemoteIoctlKind sim_remote_ioctl_kind(unsigned long request);
/*
 * The direction the argument of an ioctl request word travels in, as the
 * kernel copies it (_IOC_WRITE: the caller's bytes go in, _IOC_READ: bytes
 * come back; 0: neither). It is the word of the kernel's own table, not the
 * caller's: for KFD numbers the KFD's table (kfd-ioctl-table.h), since
 * kfd_ioctl() uses its own word; for the render node's calls the wire knows
 * (sim-drm.h, matched whole) their word, which is drm_ioctl()'s table's. A
 * number neither table knows goes neither way: the kernel refuses it before
 * it copies anything.
 */
unsigned sim_remote_ioctl_dir(unsigned long request);
/* The uapi struct size of a kind other than PLAIN and REFUSED (0 for those). */
size_t sim_remote_ioctl_struct_size(SimRemoteIoctlKind kind);

/*
 * Sends one message (the iovecs, at most SIM_REMOTE_MAX_MESSAGE bytes) with
 * fd in SCM_RIGHTS unless fd < 0. Never raises SIGPIPE. Returns 0, -EPIPE
 * when the peer is gone, -EBADF when fd is not open, other -errno.
 */
int sim_remote_send(int sock, const struct iovec *iov, size_t n_iov, int fd);
/*
 * Receives one message into buf (size bytes) and at most one fd, which lands
 * O_CLOEXEC in *ret_fd (-EBADF if none came). Returns its length, 0 at EOF
 * (the peer closed), -EPROTO for a message larger than size, several fds or
 * control data other than SCM_RIGHTS (every fd that came is closed then),
 * other -errno.
 */
ssize_t sim_remote_recv(int sock, void *buf, size_t size, int *ret_fd);
