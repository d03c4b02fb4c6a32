"""What every algorithm's run gets: a run directory it refuses to overwrite, atomic checkpoints and exact
resume, the run's config history, metrics logs and progress, plots."""
