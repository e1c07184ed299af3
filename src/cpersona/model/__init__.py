"""Pure values: records, scope rules, requests and results, the time cue."""
