/* Signal names <-> numbers, and raising a signal on oneself. TERM and INT
 * arrive through the common self-pipe (common/sig.h). */
#ifndef MW_SIGNALS_H
#define MW_SIGNALS_H

/* "SEGV", "SIGSEGV" or a number -> signal number; MC_EINVAL if unknown. */
int mw_signals_parse(const char *name);
/* Short name without "SIG" ("TERM"); "?" when unknown. */
const char *mw_signals_name(int signo);
/* Raises signo on the process. TERM and INT go through the mock's own
 * handler (so they come back through the self-pipe and this returns);
 * every other signal gets its default action first, so the process dies of
 * it even under a sanitizer that installed its own handler. */
void mw_signals_raise(int signo);

#endif
