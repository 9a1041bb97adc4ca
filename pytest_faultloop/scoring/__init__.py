"""Scoring: what an experiment is expected to show (its truth, under the restart policy), the
judges that compare each analysis with it, and the rule that turns a verdict's values into a
test item's pass or fail."""
