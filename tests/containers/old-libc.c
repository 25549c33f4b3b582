/* SPDX-License-Identifier: MIT */
/*
 * A stand-in libc.so.6 for test-podman-cdi.sh: an ELF shared object whose
 * version definitions (old-libc.map) stop at GLIBC_2.28, as RHEL 8's glibc
 * does, for kfdbroker-run to find too old for the interposer. Nothing runs it.
 */
int kfdbroker_old_libc_marker;
