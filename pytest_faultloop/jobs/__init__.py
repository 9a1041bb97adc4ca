"""The jobs themselves: the backends that run them (local processes, Slurm) and the workload
that trains, fails on purpose and leaves the artifacts."""
