"""What a run leaves on disk and reads back: the session directory, its ledger and TSV, stored
results and their revisions, claims and locks, and files read without following links."""
