"""Daemon mode: launch a daemon under test from its profile, talk to it as
its clients, read its mock workers' logs, keep its processes contained, and
the preflight of the behaviours most tests stand on."""
