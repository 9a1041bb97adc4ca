"""What a user hands in: settings (options, environment, env files), pools and their entries,
stored cases and their dev/test split, frozen corpora and perturbed copies."""
