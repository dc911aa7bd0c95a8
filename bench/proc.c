#include "proc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int read_text(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (int)n;
}

int64_t bench_proc_stat_cpu_ns(pid_t pid) {
    int64_t user_ns, sys_ns;
    if (bench_proc_stat_times_ns(pid, &user_ns, &sys_ns) < 0)
        return -1;
    return user_ns + sys_ns;
}

int bench_proc_stat_times_ns(pid_t pid, int64_t *user_ns, int64_t *sys_ns) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_text(path, buf, sizeof buf) <= 0)
        return -1;
    /* The command name may hold spaces and parentheses: count fields from
     * the last ')'. utime and stime are fields 14 and 15. */
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long long utime = 0, stime = 0;
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return -1;
    unsigned long long tick_ns = 1000000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK);
    *user_ns = (int64_t)(utime * tick_ns);
    *sys_ns = (int64_t)(stime * tick_ns);
    return 0;
}

int64_t bench_proc_sched_cpu_ns(pid_t pid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    if (read_text(path, buf, sizeof buf) <= 0)
        return -1;
    return strtoll(buf, NULL, 10);
}

long bench_proc_status_kb(pid_t pid, const char *key) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (read_text(path, buf, sizeof buf) <= 0)
        return -1;
    size_t key_len = strlen(key);
    for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, key, key_len) == 0 && line[key_len] == ':')
            return strtol(line + key_len + 1, NULL, 10);
    return -1;
}

int bench_proc_children(pid_t pid, pid_t *out, int max) {
    char path[96], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    if (read_text(path, buf, sizeof buf) <= 0)
        return 0;
    int n = 0;
    char *p = buf, *end;
    while (n < max) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        out[n++] = (pid_t)v;
        p = end;
    }
    return n;
}

int bench_proc_fd_count(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}
