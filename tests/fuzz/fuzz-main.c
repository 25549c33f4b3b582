/* SPDX-License-Identifier: MIT */
/*
 * Stand-alone driver for the fuzz targets when they are not built with
 * libFuzzer: feeds every file named on the command line (directories are
 * walked one level deep) to LLVMFuzzerTestOneInput(), so a corpus or a
 * crashing input can be replayed with any compiler and sanitizer.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
        FILE *f = fopen(path, "rb");
        uint8_t *buf = NULL;
        size_t n = 0, cap = 0;

        if (!f) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -errno;
        }
        for (;;) {
                if (n == cap) {
                        uint8_t *p = realloc(buf, cap ? cap * 2 : 4096);
                        if (!p) {
                                free(buf);
                                fclose(f);
                                return -ENOMEM;
                        }
                        buf = p;
                        cap = cap ? cap * 2 : 4096;
                }
                size_t k = fread(buf + n, 1, cap - n, f);
                n += k;
                if (k == 0)
                        break;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
        free(buf);
        return 0;
}

int main(int argc, char **argv) {
        unsigned count = 0;
        int failed = 0;

        for (int i = 1; i < argc; i++) {
                struct stat st;
                DIR *d;
                struct dirent *de;

                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
                        failed = 1;
                        continue;
                }
                if (!S_ISDIR(st.st_mode)) {
                        failed |= replay_file(argv[i]) < 0;
                        count++;
                        continue;
                }
                d = opendir(argv[i]);
                if (!d) {
                        failed = 1;
                        continue;
                }
                while ((de = readdir(d))) {
                        char path[4096];

                        if (de->d_name[0] == '.')
                                continue;
                        snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
                        failed |= replay_file(path) < 0;
                        count++;
                }
                closedir(d);
        }
        printf("replayed %u inputs\n", count);
        return failed || count == 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
