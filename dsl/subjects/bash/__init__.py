"""A linear-time parser of the bash shell() reads, building tree-sitter-bash's tree (see .parser)."""

from dsl.subjects.bash.parser import MAX_COMMANDS, MAX_NESTING, MAX_WORDS, BashSyntaxError, Tree, parse

__all__ = ["MAX_COMMANDS", "MAX_NESTING", "MAX_WORDS", "BashSyntaxError", "Tree", "parse"]
