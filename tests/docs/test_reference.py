"""docs/reference/ cannot drift from the code: the topology keys the validator accepts, the environment variables the
code reads, the CLI's commands and flags and the Makefile's targets are each listed there, nothing more; and every
`kafka-dr` command or `make` target written anywhere in the docs or the README exists."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
import yaml
from support.docs import DOCS, ROOT, code_of, first_column, markdown_files, section, subsections

from kafka_dr.cli import _parser
from kafka_dr.topology import _Parser, parse_topology
from kafka_dr_dev.cli import _parser as _dev_parser

CONFIGURATION = DOCS / "reference" / "configuration.md"
CLI = DOCS / "reference" / "cli.md"


# --- topology keys -------------------------------------------------------------------------------------------------


def _generic(path: str) -> str:
    """A parser path as the reference writes it: flows[2].topics -> flows[].topics, clusters.dc1 -> clusters.<name>."""
    path = re.sub(r"\[\d+\]", "[]", path)
    path = re.sub(r"^clusters\.[^.]+", "clusters.<name>", path)
    return re.sub(r"^clients\.[^.]+", "clients.<alias>", path)


def _accepted_keys(data: dict) -> set[str]:
    """Every key the validator allows in the mappings it meets while parsing `data`."""
    seen: set[str] = set()
    mapping = _Parser.mapping

    def spy(self: _Parser, value: object, path: str, required: tuple[str, ...], optional: tuple[str, ...]) -> dict:
        seen.update(f"{_generic(path)}.{key}".lstrip(".") for key in required + optional)
        return mapping(self, value, path, required, optional)

    with mock.patch.object(_Parser, "mapping", spy):
        parse_topology(data, "the reference's example")
    return seen


def _topology_section() -> str:
    return section(CONFIGURATION.read_text(), "Topology file")


def _example() -> dict:
    text = CONFIGURATION.read_text()
    blocks = re.findall(r"^```yaml\n(.*?)^```", text, re.S | re.M)
    assert blocks, "the configuration reference has no complete example (a yaml block)"
    return yaml.safe_load(blocks[0])


def test_the_complete_example_is_a_valid_topology_using_every_key() -> None:
    """The page's first yaml block parses, and so reaches every mapping the validator checks."""
    documented = set(first_column(_topology_section()))
    accepted = _accepted_keys(_example())
    unused = {key for key in documented - accepted if not any(other.startswith(key + ".") for other in accepted)}
    assert not unused, f"documented, but the validator does not accept them (or the example leaves them out): {unused}"


def test_every_accepted_topology_key_is_documented() -> None:
    documented = set(first_column(_topology_section()))
    missing = _accepted_keys(_example()) - documented
    assert not missing, (
        f"the validator accepts these keys, docs/reference/configuration.md does not list them: {missing}"
    )


def test_the_example_topology_files_use_only_documented_keys() -> None:
    documented = set(first_column(_topology_section()))
    for path in (ROOT / "include").glob("topology*.yaml"):
        assert _accepted_keys(yaml.safe_load(path.read_text())) <= documented | _accepted_keys(_example()), path


# --- environment variables -----------------------------------------------------------------------------------------

# Where the code reads its variables: the product and the development stack (dev/, whose `local` stack reads a few).
_PRODUCT = [
    ROOT / "include" / "kafka_dr",
    ROOT / "dev",
    ROOT / "dags",
    ROOT / "plugins",
    ROOT / "spark_jobs",
    ROOT / "docker",
]
_ENV = re.compile(r"\bKDR_[A-Z0-9_]*")


def _code_env_names() -> set[str]:
    files = [f for folder in _PRODUCT for f in folder.rglob("*") if f.suffix in (".py", ".sh")]
    files.append(ROOT / "docker-compose.yaml")
    return {name for f in files for name in _ENV.findall(f.read_text())}


def _documented_env() -> list[re.Pattern[str]]:
    """Each documented variable as a pattern: KDR_CLUSTER_<NAME>_CONFIG matches KDR_CLUSTER_DC1_CONFIG."""
    names = first_column(section(CONFIGURATION.read_text(), "Environment variables"))
    assert names, "no environment variables table"
    return [re.compile(re.sub(r"<[A-Z_]+>", "[A-Z0-9_]+", re.escape(name).replace(r"\<", "<").replace(r"\>", ">")))
            for name in names]  # fmt: skip


def test_every_environment_variable_of_the_code_is_documented() -> None:
    patterns = _documented_env()
    for name in _code_env_names():
        if name.endswith("_"):  # the start of a name made in code, f"KDR_CLUSTER_{...}_CONFIG"
            assert any(p.pattern.startswith(name) for p in patterns), f"nothing documented starting {name}"
        else:
            assert any(p.fullmatch(name) for p in patterns), f"{name} is read by the code, not documented"


def test_every_documented_environment_variable_is_in_the_code() -> None:
    names = _code_env_names()
    for pattern in _documented_env():
        assert any(pattern.fullmatch(name) or pattern.pattern.startswith(name) for name in names), pattern.pattern


# --- Airflow connections -------------------------------------------------------------------------------------------


def test_the_connections_the_hooks_use_are_documented() -> None:
    from kafka_dr.airflow.hooks.kafka_cluster import default_conn_id
    from kafka_dr.airflow.hooks.schema_registry import registry_conn_id

    documented = set(first_column(section(CONFIGURATION.read_text(), "Airflow connections")))
    assert documented == {default_conn_id("<cluster>"), registry_conn_id("<cluster>")}


# --- the CLI -------------------------------------------------------------------------------------------------------


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[str, list[str]]]:
    """Each command line's words and its flags (-h left out); `path` starts with the program's name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))
            return
    flags = [o for a in parser._actions for o in a.option_strings if o not in ("-h", "--help")]
    yield " ".join(path), flags


# The product's commands and the development stack's (`kafka-dr-dev`), documented on the same page.
COMMANDS = dict(_commands(_parser(), ("kafka-dr",))) | dict(_commands(_dev_parser(), ("kafka-dr-dev",)))
PROGRAMS = {"kafka-dr", "kafka-dr-dev"}


def test_every_command_has_its_section_listing_its_flags() -> None:
    documented = subsections(section(CLI.read_text(), "kafka-dr"), 3)
    titles = {title.strip("`") for title in documented}
    assert titles >= set(COMMANDS) - PROGRAMS, f"not documented: {set(COMMANDS) - PROGRAMS - titles}"
    assert titles <= set(COMMANDS), f"no such command: {titles - set(COMMANDS)}"
    for title, text in documented.items():
        listed = set(first_column(text))
        flags = set(COMMANDS[title.strip("`")])
        assert flags <= listed, f"{title}: flags not listed: {flags - listed}"
        assert listed <= flags, f"{title}: no such flags: {listed - flags}"


_INVOCATION = re.compile(r"(?:^|[\s`(;|&])(kafka-dr(?:-dev)?)((?:\s+[^\s|;&)`]+)*)")


TOP_FLAGS = set(COMMANDS.get("kafka-dr", [])) | {"-v", "--verbose", "-h", "--help"}


def _check_invocation(program: str, words: list[str]) -> None:
    command = program
    while words and words[0] in TOP_FLAGS:  # `kafka-dr -v local up`
        words.pop(0)
    while words and any(c == f"{command} {words[0]}" or c.startswith(f"{command} {words[0]} ") for c in COMMANDS):
        command = f"{command} {words.pop(0)}"
    group = any(c.startswith(command + " ") for c in COMMANDS)  # `kafka-dr-dev local` names the group of commands
    assert command in COMMANDS or (group and not words), f"`{command} {' '.join(words)}`: no such command"
    flags = set(COMMANDS.get(command, [])) | TOP_FLAGS
    for word in words:
        flag = word.split("=")[0]
        if flag.startswith("-") and re.fullmatch(r"--?[a-z][\w-]*", flag):
            assert flag in flags, f"`{command}` has no flag {flag}"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_commands_written_in_the_docs_exist(path: Path) -> None:
    """A `kafka-dr` (or `kafka-dr-dev`) followed by a word of a command's form (lowercase and hyphens) is a command
    line; other text after the name (an alert's title `kafka-dr flow_status ...`, a placeholder `<command>`) is not
    checked."""
    for line in code_of(path.read_text()):
        for match in _INVOCATION.finditer(line):
            words = match.group(2).split()
            if words and re.fullmatch(r"-[\w-]+|[a-z][a-z-]*", words[0]):
                _check_invocation(match.group(1), words)


# --- make targets --------------------------------------------------------------------------------------------------


def _make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):(?!=)", (ROOT / "Makefile").read_text(), re.M))


def test_every_make_target_is_documented() -> None:
    documented = {name.removeprefix("make ") for name in first_column(section(CLI.read_text(), "make targets"))}
    assert documented == _make_targets()


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_make_targets_written_in_the_docs_exist(path: Path) -> None:
    targets = _make_targets()
    for line in code_of(path.read_text()):
        for target in re.findall(r"(?:^|[\s`(;&])make\s+([a-z][\w-]*)", line):
            assert target in targets, f"`make {target}`: no such target in the Makefile"
