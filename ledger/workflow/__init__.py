"""The workflow: `machine` is the state of every request as a pure fold over ledger events (the
same code for a live Gate, a replay and verify: it imports nothing of the Gate, so the proof
layer can use it); `snapshot` keeps that state as of one event beside the ledger; `gate` is the
Gate, its steps over `catchup` (a projection of the ledger that catches up with every writer
before each step) and `reading` (its questions about requests), raising `errors`; `simulate`
replays an agent's trace through a Gate."""
