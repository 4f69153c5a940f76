"""dsl.tree_cache: `Policy.load(path, cache=True)` (the Claude Code hook's) reads the checked tree
of a source it loaded before instead of parsing it, and decides exactly as a fresh load; a
changed source, a file someone else could write, a planted pickle or a source with errors is
never read from the cache; the cache is bounded."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

import dsl.parser
from dsl import Policy, PolicyError, tree_cache

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "coding-agent.policy"
CALLS = [("Read", {"file_path": "/work/repo/src/a.py"}), ("Bash", {"command": "rm -rf /"}),
         ("Bash", {"command": "git push origin main"}), ("Write", {"file_path": "/etc/hosts", "content": "x"}),
         ("mcp__x__y", {})]


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("COUNTERSIGN_NO_PARSER_CACHE", raising=False)
    return tmp_path / "cache" / "countersign" / "trees"


def _no_parse(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("parsed, not read from the cache")

    monkeypatch.setattr(dsl.parser, "parse", refuse)


def _decisions(policy: Policy) -> list:
    return [policy.evaluate(tool, args, {"cwd": "/work/repo"}) for tool, args in CALLS]


def test_a_second_load_reads_the_tree_and_decides_as_a_fresh_load(cache_home, monkeypatch):
    fresh = Policy.load(SAMPLE)
    first = Policy.load(SAMPLE, cache=True)
    assert len(list(cache_home.glob("*.tree"))) == 1
    assert (cache_home.stat().st_mode & 0o777, next(cache_home.glob("*.tree")).stat().st_mode & 0o777) == (0o700, 0o600)
    _no_parse(monkeypatch)
    again = Policy.load(SAMPLE, cache=True)
    for p in (first, again):
        assert (p.digest, p.name, [r.rule_id for r in p.rules], p.warnings, p.default) == \
               (fresh.digest, fresh.name, [r.rule_id for r in fresh.rules], fresh.warnings, fresh.default)
        assert _decisions(p) == _decisions(fresh)


def test_without_cache_true_nothing_is_written(cache_home):
    Policy.load(SAMPLE)
    assert not cache_home.exists() or not list(cache_home.iterdir())


def test_another_source_or_tools_are_not_read_from_the_cache(cache_home, tmp_path, monkeypatch):
    path = tmp_path / "p.policy"
    path.write_text('default deny "no"\nallow Read\n')
    Policy.load(path, cache=True)
    path.write_text('default deny "no"\nask Read\n')
    assert Policy.load(path, cache=True).evaluate("Read", {}).effect == "ask"
    _no_parse(monkeypatch)
    with pytest.raises(AssertionError):
        Policy.load(path, cache=True, groups={"g": ["a"]})


def test_a_source_with_errors_is_refused_every_time(cache_home, tmp_path):
    path = tmp_path / "bad.policy"
    path.write_text('default deny "no"\nallow Read when args.x == \n')
    for _ in range(2):
        with pytest.raises(PolicyError):
            Policy.load(path, cache=True)
    assert not list(cache_home.glob("*.tree"))


def test_a_file_others_may_write_or_a_planted_pickle_is_never_read(cache_home, tmp_path, monkeypatch):
    Policy.load(SAMPLE, cache=True)
    entry = next(cache_home.glob("*.tree"))
    key = entry.name.removesuffix(tree_cache.SUFFIX)
    text = SAMPLE.read_text()
    assert tree_cache.get(text) is not None
    entry.chmod(0o666)
    assert tree_cache.get(text) is None
    entry.chmod(0o600)

    ran = tmp_path / "ran"

    class Planted:
        def __reduce__(self):
            return (os.mkdir, (str(ran),))

    entry.write_bytes(pickle.dumps((key, Planted(), ())))
    assert tree_cache.get(text) is None and not ran.exists()
    entry.write_bytes(pickle.dumps(("another key", Policy.load(SAMPLE) and None, ())))
    assert tree_cache.get(text) is None
    entry.write_bytes(b"not a pickle")
    assert Policy.load(SAMPLE, cache=True).digest == Policy.load(SAMPLE).digest  # parsed again


def test_the_cache_is_bounded_and_can_be_turned_off(cache_home, tmp_path, monkeypatch):
    for i in range(tree_cache.MAX_ENTRIES + 5):
        path = tmp_path / f"p{i}.policy"
        path.write_text(f'default deny "no"\nallow Read when args.n == {i}\n')
        Policy.load(path, cache=True)
    assert len(list(cache_home.glob("*.tree"))) == tree_cache.MAX_ENTRIES
    monkeypatch.setenv("COUNTERSIGN_NO_PARSER_CACHE", "1")
    _no_parse(monkeypatch)
    with pytest.raises(AssertionError):
        Policy.load(SAMPLE, cache=True)
