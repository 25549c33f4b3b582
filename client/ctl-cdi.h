/* SPDX-License-Identifier: MIT */
/*
 * `kfdbrokerctl cdi`: a Container Device Interface spec that gives a
 * container the broker's socket, and nothing from /dev; its second device
 * adds what runs unmodified ROCm programs through the broker.
 */
#pragma once

/* The spec's CDI version: the oldest whose schema describes mount options as
 * an array (as every CDI implementation reads them) and that has a mount's
 * "type"; 0.3.0's schema types options as one string. */
#define CTL_CDI_VERSION "0.4.0"
#define CTL_CDI_KIND "kfdbroker.org/gpu"
#define CTL_CDI_DEVICE "all"
/* The device for unmodified ROCm programs: "all" plus kfdbroker-run and the
 * interposer, read-only under CTL_CDI_ROCM_DIR (/opt/<package> is the FHS's
 * place for an add-on package: no distribution installs files there, so the
 * mounts shadow nothing of an image's). No LD_PRELOAD: docs/containers.md. */
#define CTL_CDI_ROCM_DEVICE "rocm"
#define CTL_CDI_ROCM_DIR "/opt/kfdbroker"
#define CTL_CDI_RUN_NAME "kfdbroker-run"
#define CTL_CDI_INTERPOSER_NAME "libkfdbroker-kfd.so"
/* Devices "0", "1", ...: one GPU each, through that GPU's socket beside the
 * daemon's (util/gpu-socket.h), with the ROCm files as "rocm" has them. At
 * most this many: the sockets the unit lists. */
#define CTL_CDI_MAX_GPUS 8u
/* How long `cdi` waits for the daemon to say how many GPUs it serves. */
#define CTL_CDI_ASK_TIMEOUT_MS 2000

/*
 * Writes the spec for the host socket @socket_path (made absolute against
 * the working directory if relative) to stdout, or to @argv's --output FILE
 * (written to a temporary file in the same directory, then renamed over
 * it, mode 0644). The rocm device mounts the installed kfdbroker-run and
 * libkfdbroker-kfd.so (KFDBROKER_BINDIR, KFDBROKER_LIBDIR), or those in
 * @argv's --rocm-dir DIR. A device per GPU: the daemon is asked over the
 * socket how many it serves (for at most CTL_CDI_ASK_TIMEOUT_MS); with
 * --from-sockets, or when it cannot be asked, one per GPU socket that exists
 * beside @socket_path (said on stderr). Warns on stderr when nothing listens
 * at the path yet or a ROCm file is missing.
 * @argv[0] is "cdi".
 * Returns 0, -EINVAL after printing a usage error (CTL_EXIT_USAGE is for
 * the caller to decide), or a negative errno after printing what failed.
 */
int ctl_cdi(const char *prog, const char *socket_path, int argc, char **argv);
