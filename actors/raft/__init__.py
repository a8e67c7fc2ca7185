"""The controller's hand-written Raft: pure core (`core`), settings (`config`)."""
