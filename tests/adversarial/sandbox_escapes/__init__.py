"""The sandbox against a program that wants to escape its run, keep something for a later
run, or see what it should not (see docs/security.md for the threat model).

Every test asserts, after the attack: the parent (this process) and the fork server are
alive, and the server is the same process unless the attack was killing it; no process of
the run is left; the next run in the same slot starts clean (an empty working directory)
and works. Layers that need root are asserted only where they hold (each run reports them);
a test of a root-only layer skips without root.
"""
