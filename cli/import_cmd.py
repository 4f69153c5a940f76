"""`countersign policy import ...`: translate other tools' permission settings into a policy."""

from typing import Optional

import typer

from cli.output import count as _count, EXIT_FAIL, fail

app = typer.Typer(no_args_is_help=True, help="Translate other tools' permission settings into a .policy.")


@app.command("claude-settings")
def claude_settings(
    file: str = typer.Argument(..., help="A Claude Code settings file (.claude/settings.json, settings.local.json, ...)."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Write the policy here instead of to stdout."),
    root: Optional[str] = typer.Option(
        None, "--root",
        help="The directory that /path rules are relative to. Default: the project of a .claude/ file, else the file's directory.",
    ),
    home: Optional[str] = typer.Option(
        None, "--home", help="The home directory ~ stands for (written as the policy's `home`); else calls give context.home.",
    ),
    bash_file_rules: bool = typer.Option(
        True, "--bash-file-rules/--no-bash-file-rules",
        help="Also apply Read/Edit deny rules to the files that Bash commands read or write.",
    ),
) -> None:
    """Translate a Claude Code settings file's permissions (allow / deny / ask, defaultMode,
    additionalDirectories) into an equivalent policy; notes on rules that could not be
    translated exactly go to stderr.

    Example: countersign policy import claude-settings .claude/settings.json --out claude.policy
    """
    from pathlib import Path

    from dsl import Policy, PolicyError
    from dsl.claude_import import SettingsError, import_file

    options = {"home": home, "bash_file_rules": bash_file_rules}
    if root is not None:
        options["root"] = str(Path(root).resolve())
    try:
        result = import_file(file, **options)
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    except UnicodeDecodeError:
        fail(f"{file} is not UTF-8 text")
    except SettingsError as exc:
        fail(f"{file}: {exc}")
    try:
        policy = Policy.from_text(result.text, name=out or "<imported policy>")
    except PolicyError as exc:  # a bug of the importer: never write a policy that does not load
        typer.echo(exc.render(), err=True)
        fail("the imported policy does not load; nothing was written (please report this)", EXIT_FAIL)
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    if out is None:
        typer.echo(result.text, nl=False)
    else:
        try:
            Path(out).write_text(result.text, encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write {out}: {exc.strerror or exc}")
        typer.echo(
            f"{out}: policy {policy.name!r}, {_count(len(policy.rules), 'rule')}, default {policy.default.effect}; "
            f"{len(result.notes)} note{'s' if len(result.notes) != 1 else ''}",
            err=True,
        )
