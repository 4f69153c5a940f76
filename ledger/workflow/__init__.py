"""The workflow: `machine` is the state of every request as a pure fold over ledger events (the
same code for a live Gate, a replay and verify: it imports nothing of the Gate, so the proof
layer can use it); `gate` is the Gate, a projection of the ledger that catches up with every
writer before each step; `simulate` replays an agent's trace through a Gate."""
