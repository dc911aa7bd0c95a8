/* A main for the fuzz targets when no fuzzing engine is linked: replays
 * every file of the directories (or the files) named on the command line
 * through LLVMFuzzerTestOneInput, so the seed corpus and past crashes run
 * as an ordinary test (as in cJSON's fuzzing/fuzz_main.c).
 *
 * A missing directory counts as empty. Names starting with '.' (such as
 * .gitkeep) and anything that is not a regular file are skipped; files are
 * replayed in name order. Exits 1 if a file cannot be read. A crash or a
 * harness abort() is the failure the test exists to catch. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Replays one file; returns 0, or -1 if it cannot be read. */
static int replay_file(const char *path) {
    FILE *fp = fopen(path, "rb");
    struct stat st;
    uint8_t *buf;
    size_t n;

    if (fp == NULL || fstat(fileno(fp), &st) != 0) {
        fprintf(stderr, "fuzz_main: %s: %s\n", path, strerror(errno));
        if (fp != NULL)
            fclose(fp);
        return -1;
    }
    /* Exactly the file's size, so ASan sees any read past the input. */
    buf = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
    if (buf == NULL) {
        fclose(fp);
        fprintf(stderr, "fuzz_main: %s: out of memory\n", path);
        return -1;
    }
    n = fread(buf, 1, (size_t)st.st_size, fp);
    if (ferror(fp) || n != (size_t)st.st_size) {
        fprintf(stderr, "fuzz_main: %s: short read\n", path);
        free(buf);
        fclose(fp);
        return -1;
    }
    fclose(fp);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int is_visible(const struct dirent *e) {
    return e->d_name[0] != '.';
}

int main(int argc, char **argv) {
    size_t replayed = 0;
    int status = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;
        struct dirent **names;
        int n;

        if (stat(argv[i], &st) != 0) {
            if (errno == ENOENT) {
                fprintf(stderr, "fuzz_main: %s: missing, nothing to replay\n", argv[i]);
                continue;
            }
            fprintf(stderr, "fuzz_main: %s: %s\n", argv[i], strerror(errno));
            status = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (replay_file(argv[i]) != 0)
                status = 1;
            else
                replayed++;
            continue;
        }
        n = scandir(argv[i], &names, is_visible, alphasort);
        if (n < 0) {
            fprintf(stderr, "fuzz_main: %s: %s\n", argv[i], strerror(errno));
            status = 1;
            continue;
        }
        for (int k = 0; k < n; k++) {
            size_t len = strlen(argv[i]) + strlen(names[k]->d_name) + 2;
            char *path = malloc(len);
            if (path == NULL) {
                status = 1;
            } else {
                snprintf(path, len, "%s/%s", argv[i], names[k]->d_name);
                if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
                    /* sub-directories and the like: not inputs */
                } else if (replay_file(path) != 0) {
                    status = 1;
                } else {
                    replayed++;
                }
                free(path);
            }
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %zu inputs\n", replayed);
    return status;
}
