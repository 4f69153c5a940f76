"""The countersign command line: a thin Typer layer over dsl/ and ledger/.

Commands parse options, call one library function and render its result. A user's mistake
becomes a one-line (or, for policies, a file:line:col) error and a non-zero exit code, never a
traceback.
"""
