"""A linear-time parser of the bash that shell() reads, building tree-sitter-bash 0.25.1's tree
(see .parser for what it reads and refuses, .words and .arithmetic for where its tree differs on
purpose). dsl.subjects.shell reads commands from its tree; tree-sitter-bash is the differential
tests' oracle only (tests/test_bash_parser.py), no longer a dependency of countersign.
"""

from dsl.subjects.bash.parser import MAX_COMMANDS, MAX_NESTING, MAX_WORDS, BashSyntaxError, Tree, parse, parse_expanded

__all__ = ["MAX_COMMANDS", "MAX_NESTING", "MAX_WORDS", "BashSyntaxError", "Tree", "parse", "parse_expanded"]
