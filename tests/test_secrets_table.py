"""The secrets table's one-pass lookup (`dsl.subjects.secrets.is_secret`) against the table read
the slow way: each entry tried at each position, as the module docstring defines it."""

from fnmatch import fnmatchcase

from hypothesis import given, settings, strategies as st

from dsl.subjects.secrets import DIRECTORIES, FILES, is_secret

# the table's own segments, their neighbours in case, and a few that begin none of them
_SEGMENT = st.sampled_from(sorted({s for entry in DIRECTORIES + FILES for s in entry if "*" not in s})
                           + [".SSH", ".Config", "GH", "a", "share", ".local", "id_rsa.pub", "x.pem", "1", "task", "cfg"])


def _reference(parts: tuple[str, ...]) -> bool:
    lowered = [p.lower() for p in parts]
    n = len(lowered)
    for entry in FILES:
        if len(entry) <= n and all(fnmatchcase(lowered[n - len(entry) + k], pat) for k, pat in enumerate(entry)):
            return True
    return any(tuple(lowered[at : at + len(entry)]) == entry for entry in DIRECTORIES for at in range(n - len(entry) + 1))


@settings(max_examples=2000, deadline=None)
@given(st.lists(_SEGMENT, max_size=8).map(tuple))
def test_the_one_pass_lookup_is_the_table_tried_at_every_position(parts):
    assert is_secret(parts) == _reference(parts), parts


def test_a_directory_entry_is_found_anywhere_in_a_path_that_repeats_its_first_segments():
    assert is_secret(("home", "u") + (".local", "share") * 500 + (".local", "share", "keyrings", "x"))
    assert not is_secret(("home", "u") + (".local", "share") * 500)
    assert is_secret((".config",) * 300 + ("gh",))
