"""What every other folder builds on: records, stage reports, the error tree, the retry policy, settings, workdir,
files, secrets."""
