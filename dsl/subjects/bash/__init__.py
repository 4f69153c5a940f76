"""A linear-time parser of the bash shell() reads, building tree-sitter-bash's tree (see .parser).

Status (issue 9, section 2): dsl.subjects.shell does not use it yet; it still parses with
tree-sitter-bash. The differential tests (tests/test_bash_parser.py) show the trees agree on the
corpus (1,459 of 1,479 commands; 2 refused, 18 errors to both). Switching shell._bounded_parse to
`parse` was tried: 77 tests of tests/test_shell_*.py and test_subjects.py then fail, because this
parser refuses what they read: arithmetic (`(( ))`, `$(( ))`, C-style `for`), `${...}` operators
(`${x:=v}`, `${!x}`, `${x@P}`, `${a[i]}`), `case`, arrays and subscripts, `time`, `N<` descriptors,
`$"..."` inside a word, heredoc delimiters holding quotes or backslashes, and by its limits
(MAX_COMMANDS: the brace-expansion tests build 2,400 commands). Those constructs are the next stage.
"""

from dsl.subjects.bash.parser import MAX_COMMANDS, MAX_NESTING, MAX_WORDS, BashSyntaxError, Tree, parse

__all__ = ["MAX_COMMANDS", "MAX_NESTING", "MAX_WORDS", "BashSyntaxError", "Tree", "parse"]
