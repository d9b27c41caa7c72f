"""The seeded chaos run (issue 11): a fault schedule drawn from a printed seed (`schedule`),
the faults themselves on real processes and a broker of the run's own (`faults`), or a cluster
of three behind Toxiproxy with its broker and network faults (`cluster`, issue 24), the input
with its malformed records (`workload`), and a verifier that knows only the input
(`verifier`); `run` ties them together."""
