/* The part of a stdio Bus config file bench_relay uses: the first pool's
 * command and args, and the two buffer limits. */
#ifndef BENCH_RELAY_CONFIG_H
#define BENCH_RELAY_CONFIG_H

#include <stddef.h>

typedef struct {
    char **argv;             /* command then args, NULL-terminated; owned */
    size_t max_input_buffer; /* defaults as in spec 8.1 */
    size_t max_output_queue;
} relay_config;

/* Reads path. Returns 0, or -1 with a message in err. On success the
 * caller owns cfg and frees it with relay_config_fini. */
int relay_config_load(const char *path, relay_config *cfg, char *err, size_t err_size);
void relay_config_fini(relay_config *cfg);

#endif
