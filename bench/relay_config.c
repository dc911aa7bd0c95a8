#include "relay_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path, char *err, size_t err_size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_size, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    while (text) {
        len += fread(text + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        char *grown = realloc(text, cap * 2);
        if (!grown) {
            free(text);
            text = NULL;
            break;
        }
        text = grown;
        cap *= 2;
    }
    fclose(f);
    if (!text) {
        snprintf(err, err_size, "%s: out of memory", path);
        return NULL;
    }
    text[len] = '\0';
    return text;
}

static size_t get_limit(const cJSON *limits, const char *key, size_t fallback) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(limits, key);
    return cJSON_IsNumber(v) && v->valuedouble >= 1 ? (size_t)v->valuedouble : fallback;
}

int relay_config_load(const char *path, relay_config *cfg, char *err, size_t err_size) {
    memset(cfg, 0, sizeof *cfg);
    char *text = read_file(path, err, err_size);
    if (!text)
        return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *pools = cJSON_GetObjectItemCaseSensitive(root, "pools");
    const cJSON *pool = cJSON_GetArrayItem(pools, 0);
    const cJSON *command = cJSON_GetObjectItemCaseSensitive(pool, "command");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(pool, "args");
    if (!cJSON_IsString(command)) {
        snprintf(err, err_size, "%s: pools[0].command: missing (or not JSON)", path);
        cJSON_Delete(root);
        return -1;
    }
    int argc = cJSON_IsArray(args) ? cJSON_GetArraySize(args) : 0;
    cfg->argv = calloc((size_t)argc + 2, sizeof *cfg->argv);
    int ok = cfg->argv && (cfg->argv[0] = strdup(command->valuestring));
    for (int i = 0; ok && i < argc; i++) {
        const cJSON *a = cJSON_GetArrayItem(args, i);
        ok = cJSON_IsString(a) && (cfg->argv[i + 1] = strdup(a->valuestring));
    }
    const cJSON *limits = cJSON_GetObjectItemCaseSensitive(root, "limits");
    cfg->max_input_buffer = get_limit(limits, "max_input_buffer", 1048576);
    cfg->max_output_queue = get_limit(limits, "max_output_queue", 4194304);
    cJSON_Delete(root);
    if (!ok) {
        snprintf(err, err_size, "%s: pools[0].args: strings expected (or out of memory)", path);
        relay_config_fini(cfg);
        return -1;
    }
    return 0;
}

void relay_config_fini(relay_config *cfg) {
    for (char **a = cfg->argv; a && *a; a++)
        free(*a);
    free(cfg->argv);
    memset(cfg, 0, sizeof *cfg);
}
