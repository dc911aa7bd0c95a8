"""What every layer uses: the error classes (who is blamed), the run's context
and waits, /proc, and the transcript of what crossed the boundary."""
