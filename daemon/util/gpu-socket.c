/* SPDX-License-Identifier: MIT */
/* See gpu-socket.h. */
#include "gpu-socket.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int gpu_socket_path(const char *main_path, unsigned index, char *buf, size_t size) {
        size_t len = strlen(main_path);
        int n;

        if (len >= 5 && strcmp(main_path + len - 5, ".sock") == 0)
                n = snprintf(buf, size, "%.*s-gpu%u.sock", (int) (len - 5), main_path, index);
        else
                n = snprintf(buf, size, "%s-gpu%u", main_path, index);
        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}
