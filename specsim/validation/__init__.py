"""The error of the answers: published speculative-decoding results (a corpus of rows we wrote, each naming
its source) priced by the planner, with errors per source group, baseline rates and batch crossovers."""
