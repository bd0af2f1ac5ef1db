"""``raftlog completion bash|zsh|fish``: a completion script written from the parser itself, so it names
every command, subcommand and option there is. zsh gets the bash script behind zsh's own bash-completion
layer (``bashcompinit``); fish gets one of its own, the same words for the same command paths.

    source <(raftlog completion bash)      # or save it under /etc/bash_completion.d/raftlog
    source <(raftlog completion zsh)       # in ~/.zshrc
    raftlog completion fish > ~/.config/fish/completions/raftlog.fish
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

_SCRIPT = """# bash completion for raftlog (raftlog completion bash)
_raftlog() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" path="raftlog" word i
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        [[ "$word" == -* ]] && continue
        [[ -n "${{_raftlog_words[$path $word]+set}}" ]] && path="$path $word"
    done
    COMPREPLY=($(compgen -W "${{_raftlog_words[$path]}}" -- "$cur"))
}}
declare -gA _raftlog_words=(
{entries}
)
complete -F _raftlog raftlog
"""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _paths(parser: argparse.ArgumentParser, path: str = "raftlog") -> Iterator[tuple[str, list[str]]]:
    """Each command path (``raftlog``, ``raftlog topic``, ...) and the words that may follow it."""
    children = _subparsers(parser)
    options = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    choices = [  # a positional with fixed values: raftlog dev status, raftlog completion bash
        str(choice)
        for action in parser._actions
        if not action.option_strings and action.choices and not isinstance(action, argparse._SubParsersAction)
        for choice in action.choices
    ]
    yield path, sorted(children) + choices + sorted(options)
    for name, child in sorted(children.items()):
        yield from _paths(child, f"{path} {name}")


ZSH_PREAMBLE = """# zsh completion for raftlog (raftlog completion zsh): the bash script through bashcompinit
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
"""


def bash_script(parser: argparse.ArgumentParser) -> str:
    entries = "\n".join(f'    ["{path}"]="{" ".join(words)}"' for path, words in _paths(parser))
    return _SCRIPT.format(entries=entries)


_FISH = """# fish completion for raftlog (raftlog completion fish)
function __raftlog_path --description 'the raftlog command path typed so far'
    set -l path raftlog
    for word in (commandline -opc)[2..-1]
        string match -q -- '-*' $word; and continue
        contains -- "$path $word" $__raftlog_paths; and set path "$path $word"
    end
    echo $path
end
set -g __raftlog_paths {paths}
complete -c raftlog -f
{completions}
"""


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_script(parser: argparse.ArgumentParser) -> str:
    paths = list(_paths(parser))
    completions = "\n".join(
        f"complete -c raftlog -n {_fish_quote(f'test (__raftlog_path) = {_fish_quote(path)}')} "
        f"-a {_fish_quote(' '.join(words))}"
        for path, words in paths
    )
    return _FISH.format(paths=" ".join(_fish_quote(path) for path, _ in paths), completions=completions)


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    if shell == "fish":
        return fish_script(parser)
    return bash_script(parser) if shell == "bash" else ZSH_PREAMBLE + bash_script(parser)


def add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], parser: argparse.ArgumentParser
) -> None:
    completion = commands.add_parser("completion", help="print a shell completion script (bash, zsh or fish)")
    completion.add_argument("shell", choices=["bash", "zsh", "fish"])

    def run(args: argparse.Namespace) -> int:
        print(script(parser, args.shell), end="")
        return 0

    completion.set_defaults(run=run)
