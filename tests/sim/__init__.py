"""The seeded simulators: the whole-cluster simulation (cluster_*.py, run by
test_cluster_sim.py and the named scenarios of test_cluster_scenarios.py), the RaftCore
simulation (raft_sim.py) and the mutants that prove they have teeth (mutants.py, run_mutants.py).
Their simulated network and disk are in tests/harness."""
