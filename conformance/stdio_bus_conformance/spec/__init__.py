"""The clauses: the registry read from SPEC.md / WORKER_SPEC.md, and
check()/checking(), which judge a failure by one of them."""
