"""fbus: a second, independent stdio Bus daemon (spec v0.1.0), written in
Python for the harness self-tests. It shares no code and no wording with the
reference daemon in src/ and makes its own choice wherever SPEC.md's
Interpretations leave one open (see README.md next to this file)."""
