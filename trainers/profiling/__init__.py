"""Where a run's seconds go, measured from inside: the step profile's phase timer
(:mod:`trainers.profiling.phases`). The bottom layer, importing only the standard library, so that
every layer can time its own work."""
